// Round trips through real files for every dataset and attribute kind of astraflow/io/h5.hpp,
// and the errors a reader must get instead of undefined behaviour.
#include <gtest/gtest.h>
#include <hdf5.h>  // only to count open identifiers

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "astraflow/io/h5.hpp"
#include "io/temp_dir.hpp"

namespace astraflow::io {
namespace {

using test::TempDir;

// Runs `body` and returns the H5Error message it throws; fails the test if it does not throw.
template <class Body>
std::string h5ErrorOf(Body&& body) {
  try {
    body();
  } catch (const H5Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an H5Error";
  return {};
}

template <class T>
class ScalarRoundTrip : public ::testing::Test {};
using ScalarTypes = ::testing::Types<std::int32_t, std::int64_t, std::uint16_t, std::uint64_t, float, double>;
TYPED_TEST_SUITE(ScalarRoundTrip, ScalarTypes);

TYPED_TEST(ScalarRoundTrip, FixedVectorSurvivesReopen) {
  using T = TypeParam;
  using Limits = std::numeric_limits<T>;
  const std::vector<T> values = {Limits::lowest(), Limits::max(), T(0), T(1), T(42), Limits::min(), T(7)};
  TempDir dir;
  const auto path = dir.file("scalars.h5");
  {
    auto file = H5File::create(path);
    file.writeVector("values", values);
    file.writeVector("empty", std::vector<T>{});
  }
  const auto file = H5File::openReadOnly(path);
  EXPECT_EQ(file.readVector<T>("values"), values);
  EXPECT_EQ(file.openDataset("values").shape(), std::vector<std::uint64_t>{values.size()});
  EXPECT_TRUE(file.readVector<T>("empty").empty());
}

TYPED_TEST(ScalarRoundTrip, ExtendibleVectorGrowsWithEachAppend) {
  using T = TypeParam;
  TempDir dir;
  const auto path = dir.file("append1d.h5");
  std::vector<T> expected;
  {
    auto file = H5File::create(path);
    auto dataset = file.template createExtendible<T>("grow", 0, 4);
    for (int batch = 0; batch < 5; ++batch) {
      std::vector<T> values;
      for (int i = 0; i < batch * 3; ++i) values.push_back(static_cast<T>(batch * 10 + i));
      dataset.appendRows(values);
      expected.insert(expected.end(), values.begin(), values.end());
      EXPECT_EQ(dataset.rows(), expected.size());
    }
  }
  const auto file = H5File::openReadOnly(path);
  EXPECT_EQ(file.readVector<T>("grow"), expected);
  EXPECT_EQ(file.openDataset("grow").space().maxDims(), std::vector<std::uint64_t>{H5Dataspace::kUnlimited});
}

TEST(H5Extendible, MatrixAppendsKeepRowsAndColumns) {
  TempDir dir;
  const auto path = dir.file("matrix.h5");
  constexpr std::uint64_t kCols = 3;
  std::vector<double> expected;
  {
    auto file = H5File::create(path);
    auto dataset = file.createExtendible<double>("m", kCols, 2);
    for (const std::uint64_t rows : {1, 4, 0, 2}) {
      std::vector<double> batch;
      for (std::uint64_t i = 0; i < rows * kCols; ++i) {
        batch.push_back(static_cast<double>(expected.size() + i) + 0.25);
      }
      dataset.appendRows(batch);
      expected.insert(expected.end(), batch.begin(), batch.end());
    }
    // A partial row must not be written as garbage.
    const auto message = h5ErrorOf([&] { dataset.appendRows(std::vector<double>{1.0, 2.0}); });
    EXPECT_NE(message.find("whole number of rows"), std::string::npos) << message;
  }
  const auto file = H5File::openReadOnly(path);
  const auto matrix = file.openDataset("m").readMatrix<double>();
  EXPECT_EQ(matrix.rows, 7u);
  EXPECT_EQ(matrix.cols, kCols);
  EXPECT_EQ(matrix.values, expected);
  EXPECT_DOUBLE_EQ(matrix.at(6, 2), 20.25);
  EXPECT_EQ(file.openDataset("m").space().maxDims(), (std::vector<std::uint64_t>{H5Dataspace::kUnlimited, kCols}));
}

TEST(H5Sequences, VariableLengthRoundTripIncludingEmpty) {
  TempDir dir;
  const auto path = dir.file("tokens.h5");
  std::vector<std::int32_t> long_sequence(1000);
  for (std::size_t i = 0; i < long_sequence.size(); ++i) {
    long_sequence[i] = static_cast<std::int32_t>(i * 7) - 3000;
  }
  const Sequences first = {{1, 2, 3}, {}, {std::numeric_limits<std::int32_t>::min()}};
  const Sequences second = {long_sequence, {}, {42, -42}};
  {
    auto file = H5File::create(path);
    auto dataset = file.createSequences("tokens", 2);
    dataset.appendSequences(first);
    dataset.appendSequences({});
    dataset.appendSequences(second);
    file.writeSequences("once", second);
  }
  Sequences expected = first;
  expected.insert(expected.end(), second.begin(), second.end());
  const auto file = H5File::openReadOnly(path);
  const auto tokens = file.openDataset("tokens").readSequences();
  EXPECT_EQ(tokens, expected);
  ASSERT_EQ(tokens.size(), 6u);
  EXPECT_TRUE(tokens[1].empty());
  EXPECT_EQ(tokens[3].size(), 1000u);
  EXPECT_EQ(file.openDataset("once").readSequences(), second);
}

TEST(H5Attributes, EveryKindOnFileGroupAndDataset) {
  TempDir dir;
  const auto path = dir.file("attrs.h5");
  const std::string unicode = "bf16 \xE2\x86\x92 \xCE\xB8";  // "bf16 → θ"
  {
    auto file = H5File::create(path);
    auto group = file.createGroup("policy");
    auto dataset = group.writeVector("weights", std::vector<std::uint16_t>{1, 2});
    for (const H5Object* owner : {static_cast<const H5Object*>(&file), static_cast<const H5Object*>(&group),
                                  static_cast<const H5Object*>(&dataset)}) {
      owner->writeAttribute("text", unicode);
      owner->writeAttribute("empty", "");
      owner->writeAttribute("count", std::int64_t{-9'000'000'000'000});
      owner->writeAttribute("small", 7);  // an int goes through the int64 path
      owner->writeAttribute("ratio", -0.125);
      owner->writeAttribute("replaced", 1.5);
      owner->writeAttribute("replaced", "now a string");
    }
    dataset.writeAttribute("dtype", "bfloat16");
  }
  const auto file = H5File::openReadOnly(path);
  const auto group = file.openGroup("policy");
  const auto dataset = file.openDataset("policy/weights");
  for (const H5Object* owner : {static_cast<const H5Object*>(&file), static_cast<const H5Object*>(&group),
                                static_cast<const H5Object*>(&dataset)}) {
    SCOPED_TRACE(owner->name());
    EXPECT_EQ(owner->readStringAttribute("text"), unicode);
    EXPECT_EQ(owner->readStringAttribute("empty"), "");
    EXPECT_EQ(owner->readInt64Attribute("count"), -9'000'000'000'000);
    EXPECT_EQ(owner->readInt64Attribute("small"), 7);
    EXPECT_EQ(owner->readDoubleAttribute("ratio"), -0.125);
    EXPECT_EQ(owner->readStringAttribute("replaced"), "now a string");
    EXPECT_TRUE(owner->hasAttribute("count"));
    EXPECT_FALSE(owner->hasAttribute("missing"));
  }
  EXPECT_EQ(dataset.readStringAttribute("dtype"), "bfloat16");
  EXPECT_FALSE(file.hasAttribute("dtype"));

  const auto wrong = h5ErrorOf([&] { (void)file.readInt64Attribute("text"); });
  EXPECT_NE(wrong.find("'text'"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("string"), std::string::npos) << wrong;
  const auto as_string = h5ErrorOf([&] { (void)group.readStringAttribute("ratio"); });
  EXPECT_NE(as_string.find("float64"), std::string::npos) << as_string;
  const auto missing = h5ErrorOf([&] { (void)dataset.readDoubleAttribute("missing"); });
  EXPECT_NE(missing.find("'missing'"), std::string::npos) << missing;
}

TEST(H5Groups, NestedPathsCreateOpenAndExist) {
  TempDir dir;
  const auto path = dir.file("groups.h5");
  {
    auto file = H5File::create(path);
    auto deep = file.createGroup("a/b/c");
    deep.writeVector("data", std::array<std::int64_t, 3>{5, 6, 7});
    auto b = file.openGroup("a/b");
    b.createGroup("sibling/leaf").writeVector("x", std::vector<float>{1.5f});
    file.writeVector("d/e/auto", std::vector<std::int32_t>{9});  // intermediate groups made
  }
  const auto file = H5File::openReadOnly(path);
  EXPECT_TRUE(file.exists("a/b/c"));
  EXPECT_TRUE(file.exists("/a/b/c/data"));
  EXPECT_TRUE(file.exists("a/b/sibling/leaf/x"));
  EXPECT_FALSE(file.exists("a/x/y"));
  EXPECT_FALSE(file.exists("a/b/c/nothing"));
  EXPECT_EQ(file.readVector<std::int64_t>("a/b/c/data"), (std::vector<std::int64_t>{5, 6, 7}));
  const auto b = file.openGroup("a/b");
  EXPECT_EQ(b.name(), "/a/b");
  EXPECT_EQ(b.openGroup("c").readVector<std::int64_t>("data"), (std::vector<std::int64_t>{5, 6, 7}));
  EXPECT_EQ(b.readVector<float>("sibling/leaf/x"), std::vector<float>{1.5f});
  EXPECT_EQ(file.readVector<std::int32_t>("d/e/auto"), std::vector<std::int32_t>{9});
}

TEST(H5Handles, MoveTransfersOwnership) {
  TempDir dir;
  auto file = H5File::create(dir.file("move.h5"));
  const std::int64_t id = file.id();
  H5File moved = std::move(file);
  EXPECT_FALSE(file.valid());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_EQ(moved.id(), id);
  moved.writeVector("v", std::vector<double>{1.0});
  H5File other = H5File::create(dir.file("other.h5"));
  other = std::move(moved);  // closes "other.h5", keeps "move.h5" open
  EXPECT_EQ(other.id(), id);
  EXPECT_EQ(other.path(), dir.file("move.h5"));
  other.flush();
  EXPECT_EQ(other.readVector<double>("v"), std::vector<double>{1.0});
}

// Every wrapper closes what it owns, also on the error paths.
TEST(H5Handles, NothingStaysOpenAfterUse) {
  const auto open_ids = [] { return H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL); };
  const auto before = open_ids();
  {
    TempDir dir;
    {
      auto file = H5File::create(dir.file("leak.h5"));
      auto group = file.createGroup("g/h");
      group.writeVector("v", std::vector<std::int32_t>{1, 2});
      group.writeAttribute("a", "x");
      file.createExtendible<double>("m", 2).appendRows(std::vector<double>{1, 2});
      file.writeSequences("s", {{1}, {}});
      EXPECT_GT(open_ids(), before);
    }
    {
      const auto file = H5File::openReadOnly(dir.file("leak.h5"));
      (void)file.openGroup("g/h").readStringAttribute("a");
      (void)file.openDataset("m").readMatrix<double>();
      (void)file.openDataset("s").readSequences();
      (void)h5ErrorOf([&] { (void)file.readVector<float>("g/h/v"); });
      (void)h5ErrorOf([&] { (void)file.openGroup("g/h").readInt64Attribute("a"); });
    }
  }
  EXPECT_EQ(open_ids(), before);
}

TEST(H5Errors, MissingFileNamesThePathAndLocation) {
  TempDir dir;
  const auto path = dir.file("does_not_exist.h5");
  const auto message = h5ErrorOf([&] { (void)H5File::openReadOnly(path); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("H5Fopen"), std::string::npos) << message;
  EXPECT_NE(message.find(processLocation()), std::string::npos) << message;
  EXPECT_NE(message.find("h5_file.cpp:"), std::string::npos) << message;
  // The HDF5 error stack itself is part of the message.
  EXPECT_NE(message.find("H5Fopen()"), std::string::npos) << message;

  const auto in_missing_dir = dir.file("no/such/dir/x.h5");
  const auto create = h5ErrorOf([&] { (void)H5File::create(in_missing_dir); });
  EXPECT_NE(create.find(in_missing_dir), std::string::npos) << create;
}

TEST(H5Errors, WrongTypeOrRankIsRejected) {
  TempDir dir;
  const auto path = dir.file("typed.h5");
  {
    auto file = H5File::create(path);
    file.writeVector("ints", std::vector<std::int32_t>{1, 2, 3});
    file.writeVector("u64", std::vector<std::uint64_t>{1});
    file.createExtendible<float>("matrix", 2).appendRows(std::vector<float>{1, 2, 3, 4});
    file.writeSequences("seqs", {{1}, {2, 3}});
  }
  {
    const auto file = H5File::openReadOnly(path);
    const auto as_double = h5ErrorOf([&] { (void)file.readVector<double>("ints"); });
    EXPECT_NE(as_double.find("int32"), std::string::npos) << as_double;
    EXPECT_NE(as_double.find("float64"), std::string::npos) << as_double;
    EXPECT_NE(as_double.find("/ints"), std::string::npos) << as_double;
    // Same size, other signedness: still a different type.
    (void)h5ErrorOf([&] { (void)file.readVector<std::int64_t>("u64"); });
    (void)h5ErrorOf([&] { (void)file.readVector<std::int64_t>("ints"); });
    const auto rank = h5ErrorOf([&] { (void)file.readVector<float>("matrix"); });
    EXPECT_NE(rank.find("rank 2"), std::string::npos) << rank;
    (void)h5ErrorOf([&] { (void)file.openDataset("ints").readMatrix<std::int32_t>(); });
    (void)h5ErrorOf([&] { (void)file.readVector<std::int32_t>("seqs"); });
    const auto not_seqs = h5ErrorOf([&] { (void)file.openDataset("ints").readSequences(); });
    EXPECT_NE(not_seqs.find("vlen<int32>"), std::string::npos) << not_seqs;
    const auto missing = h5ErrorOf([&] { (void)file.openDataset("nope"); });
    EXPECT_NE(missing.find("'nope'"), std::string::npos) << missing;
  }  // closed: HDF5 refuses to reopen read-write a file this process holds read-only
  // Appending to a fixed-size dataset cannot grow it.
  auto rw = H5File::openReadWrite(path);
  (void)h5ErrorOf([&] { rw.openDataset("ints").appendRows(std::vector<std::int32_t>{4}); });
  (void)h5ErrorOf([&] { rw.openDataset("ints").appendRows(std::vector<double>{4}); });
  EXPECT_EQ(rw.readVector<std::int32_t>("ints"), (std::vector<std::int32_t>{1, 2, 3}));
}

}  // namespace
}  // namespace astraflow::io
