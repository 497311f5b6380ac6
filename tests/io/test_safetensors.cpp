// Safetensors against the reference implementation (Hugging Face's `safetensors` package, run by
// tests/io/safetensors_reference.py): files it writes are read exactly (every dtype, metadata,
// empty and scalar tensors), files astraflow writes — single and sharded with an index — load
// in it with the same values; and every malformed file is refused naming the file and tensor.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "astraflow/io/safetensors.hpp"
#include "temp_dir.hpp"

using namespace astraflow;
using namespace astraflow::io;

namespace {

// The reference script through the project's Python (ASTRAFLOW_PYTHON, set by ctest).
int reference(const std::string& args) {
  const char* py = std::getenv("ASTRAFLOW_PYTHON");
  const char* script = std::getenv("ASTRAFLOW_SAFETENSORS_REFERENCE");
  if (!py || !script)
    ADD_FAILURE() << "ASTRAFLOW_PYTHON / ASTRAFLOW_SAFETENSORS_REFERENCE are not set (run under ctest)";
  if (!py || !script) return -1;
  return std::system((std::string(py) + " " + script + " " + args).c_str());
}

std::vector<std::byte> fileBytes(const std::string& header, std::size_t data_bytes, std::uint64_t length_field = 0) {
  std::vector<std::byte> out(8 + header.size() + data_bytes, std::byte{0});
  const std::uint64_t len = length_field ? length_field : header.size();
  std::memcpy(out.data(), &len, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

void writeBytes(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::string refusal(const std::string& path) {
  try {
    SafetensorsFile::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST(Safetensors, ReadsTheReferenceWriterAndWritesWhatItReads) {
  test::TempDir dir;
  ASSERT_EQ(reference("write " + dir.file("ref.safetensors")), 0);
  const auto f = SafetensorsFile::open(dir.file("ref.safetensors"));
  EXPECT_EQ(f.tensors().size(), 12u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const StTensorView* iota = f.find("iota");
  ASSERT_NE(iota, nullptr);
  EXPECT_EQ(iota->dtype, StDtype::F32);
  ASSERT_EQ(iota->shape, (std::vector<std::int64_t>{10}));
  for (int i = 0; i < 10; ++i) {
    float v = 0;
    std::memcpy(&v, iota->bytes.data() + 4 * i, 4);
    EXPECT_EQ(v, static_cast<float>(i));
  }
  EXPECT_EQ(f.find("brain")->dtype, StDtype::BF16);
  EXPECT_EQ(f.find("brain")->shape, (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_EQ(f.find("half")->dtype, StDtype::F16);
  EXPECT_TRUE(f.find("double_scalar")->shape.empty());
  EXPECT_EQ(f.find("empty")->bytes.size(), 0u);
  EXPECT_EQ(f.find("flags")->dtype, StDtype::Bool);
  std::int64_t big = 0;
  std::memcpy(&big, f.find("ids")->bytes.data() + 16, 8);
  EXPECT_EQ(big, std::int64_t{1} << 40);

  // Rewritten by astraflow (in its own order), the reference reads the same tensors back.
  writeSafetensors(dir.file("ours.safetensors"), f.tensors(), f.metadata());
  EXPECT_EQ(reference("compare " + dir.file("ref.safetensors") + " " + dir.file("ours.safetensors")), 0);
  // The comparison can fail: a changed value is seen.
  std::vector<StTensorView> changed = f.tensors();
  std::vector<std::byte> other(iota->bytes.begin(), iota->bytes.end());
  other[4] ^= std::byte{1};
  for (auto& t : changed)
    if (t.name == "iota") t.bytes = other;
  writeSafetensors(dir.file("changed.safetensors"), changed, f.metadata());
  EXPECT_NE(
      reference("compare " + dir.file("ref.safetensors") + " " + dir.file("changed.safetensors") + " 2>/dev/null"), 0);
}

TEST(Safetensors, ShardedCheckpointsRoundTripThroughTheIndex) {
  test::TempDir dir;
  ASSERT_EQ(reference("write " + dir.file("ref.safetensors")), 0);
  const auto f = SafetensorsFile::open(dir.file("ref.safetensors"));
  const auto written = writeSafetensorsCheckpoint(dir.path() / "sharded", f.tensors(), 64);
  ASSERT_GT(written.size(), 3u);  // several shards and the index
  EXPECT_EQ(written.back().filename(), "model.safetensors.index.json");
  EXPECT_EQ(reference("sharded " + (dir.path() / "sharded").string() + " " + dir.file("ref.safetensors")), 0);
  const auto c = SafetensorsCheckpoint::open(dir.path() / "sharded");
  EXPECT_EQ(c.shards(), written.size() - 1);
  ASSERT_EQ(c.tensors().size(), f.tensors().size());
  for (const auto& t : f.tensors()) {
    const StTensorView* u = c.find(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(u->shape, t.shape);
    EXPECT_TRUE(std::equal(t.bytes.begin(), t.bytes.end(), u->bytes.begin(), u->bytes.end())) << t.name;
  }
  // One shard when everything fits: model.safetensors, no index.
  const auto single = writeSafetensorsCheckpoint(dir.path() / "single", f.tensors(), 1 << 20);
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(single.front().filename(), "model.safetensors");
  EXPECT_EQ(SafetensorsCheckpoint::open(dir.path() / "single").tensors().size(), f.tensors().size());
}

TEST(Safetensors, AnIndexThatDisagreesWithItsShardsIsRefused) {
  test::TempDir dir;
  const float values[4] = {1, 2, 3, 4};
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(values), sizeof values);
  const std::vector<StTensorView> tensors{{"a", StDtype::F32, {2}, bytes.subspan(0, 8)},
                                          {"b", StDtype::F32, {2}, bytes.subspan(8, 8)}};
  writeSafetensorsCheckpoint(dir.path(), tensors, 8);
  const auto index = dir.file("model.safetensors.index.json");
  std::ifstream in(index);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  in.close();
  auto expectRefused = [&](const std::string& edited, const std::string& fragment) {
    std::ofstream(index) << edited;
    try {
      SafetensorsCheckpoint::open(dir.path());
      ADD_FAILURE() << "accepted: " << edited;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expectRefused(R"({"metadata": {"total_size": 16}, "weight_map": {"a": "model-00002-of-00002.safetensors",
                 "b": "model-00001-of-00002.safetensors"}})",
                "is there, but the index puts it in");
  std::string extra = text;
  extra.replace(extra.find("\"weight_map\": {"), 15, "\"weight_map\": {\"c\": \"model-00001-of-00002.safetensors\",");
  expectRefused(extra, "lists tensor 'c' here, the file lacks it");
  std::string outside = text;
  outside.replace(outside.find("\"model-00001"), 12, "\"../model-00001");
  expectRefused(outside, "not a file beside the index");
}

struct Malformed {
  const char* what;
  std::string header;
  std::size_t data_bytes;
  std::string expect;
  std::uint64_t length_field = 0;
};

class SafetensorsMalformed : public ::testing::TestWithParam<Malformed> {};

TEST_P(SafetensorsMalformed, IsRefusedNamingTheFileAndTensor) {
  const Malformed& m = GetParam();
  test::TempDir dir;
  const auto path = dir.file("bad.safetensors");
  writeBytes(path, fileBytes(m.header, m.data_bytes, m.length_field));
  const std::string msg = refusal(path);
  if (m.expect == "(accepted)") {
    EXPECT_EQ(msg, "(accepted)");  // the table's files differ from this one in one rule each
    return;
  }
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find(m.expect), std::string::npos) << m.what << ": " << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Table, SafetensorsMalformed,
    ::testing::Values(
        Malformed{"valid baseline is accepted", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8,
                  "(accepted)"},
        Malformed{"header past the end", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8,
                  "runs past the end of the file", 4096},
        Malformed{"truncated data", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 6,
                  "tensor 'w': data_offsets [0, 8] are outside the 6-byte data buffer"},
        Malformed{"overlap",
                  R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                  12, "tensor 'b' overlaps the tensor before it"},
        Malformed{"hole",
                  R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                  12, "bytes [4, 8) before tensor 'b' belong to no tensor"},
        Malformed{"trailing bytes", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 12,
                  "bytes [8, 12) at the end belong to no tensor"},
        Malformed{"unknown dtype", R"({"w":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", 2,
                  "tensor 'w': dtype \"F8_E4M3\" is not one of F64, F32"},
        Malformed{"shape and bytes disagree", R"({"w":{"dtype":"BF16","shape":[3,2],"data_offsets":[0,8]}})", 8,
                  "tensor 'w': shape [3,2] of BF16 needs 12 bytes, data_offsets give 8"},
        Malformed{"duplicate name",
                  R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                  8, "tensor 'w' is named twice"},
        Malformed{"not JSON", R"({"w": [1, 2)", 0, "not valid JSON"},
        Malformed{"not an object", R"(["w"])", 0, "not a JSON object"},
        Malformed{"missing field", R"({"w":{"dtype":"F32","shape":[2]}})", 0,
                  "tensor 'w': needs dtype, shape and data_offsets"},
        Malformed{"negative dimension", R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 0,
                  "tensor 'w': negative dimension -1"},
        Malformed{"negative offset", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 4,
                  "tensor 'w': data_offsets is not [begin, end]"},
        Malformed{"metadata not strings", R"({"__metadata__":{"n":3}})", 0, "__metadata__['n'] is not a string"}),
    [](const auto& param_info) {
      std::string name = param_info.param.what;
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

TEST(Safetensors, TooShortFileIsRefused) {
  test::TempDir dir;
  writeBytes(dir.file("short.safetensors"), std::vector<std::byte>(5));
  EXPECT_NE(refusal(dir.file("short.safetensors")).find("5 bytes: shorter than the 8-byte header length"),
            std::string::npos);
}

TEST(Safetensors, TheWriterRefusesBadTensorsAndLeavesNoFile) {
  test::TempDir dir;
  const float v[2] = {1, 2};
  const std::span<const std::byte> b(reinterpret_cast<const std::byte*>(v), sizeof v);
  auto refusedWrite = [&](const std::vector<StTensorView>& ts) -> std::string {
    try {
      writeSafetensors(dir.file("out.safetensors"), ts);
    } catch (const Error& e) {
      return e.what();
    }
    return "(written)";
  };
  EXPECT_NE(refusedWrite({{"x", StDtype::F32, {3}, b}}).find("tensor 'x': 8 bytes given, its shape and dtype need 12"),
            std::string::npos);
  EXPECT_NE(refusedWrite({{"x", StDtype::F32, {2}, b}, {"x", StDtype::F32, {2}, b}}).find("tensor 'x' is given twice"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.safetensors")));
  // Written files start their data 8-byte aligned (the header is padded with spaces).
  writeSafetensors(dir.file("ok.safetensors"), {{"x", StDtype::F32, {2}, b}}, {{"k", "v"}});
  std::ifstream in(dir.file("ok.safetensors"), std::ios::binary);
  std::uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  EXPECT_EQ((8 + len) % 8, 0u);
  EXPECT_EQ(SafetensorsFile::open(dir.file("ok.safetensors")).metadata().at("k"), "v");
}

TEST(Safetensors, RandomCorruptionIsRefusedOrReadNeverACrash) {
  const float v[6] = {1, 2, 3, 4, 5, 6};
  const std::span<const std::byte> b(reinterpret_cast<const std::byte*>(v), sizeof v);
  test::TempDir dir;
  writeSafetensors(dir.file("ok.safetensors"),
                   {{"a", StDtype::F32, {2}, b.subspan(0, 8)},
                    {"b", StDtype::BF16, {2, 2}, b.subspan(8, 8)},
                    {"c", StDtype::U8, {8}, b.subspan(16, 8)}},
                   {{"format", "pt"}});
  std::ifstream in(dir.file("ok.safetensors"), std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::byte> good(raw.size());
  std::memcpy(good.data(), raw.data(), raw.size());
  std::mt19937 rng(42);
  int refused = 0, read = 0;
  for (int i = 0; i < 4000; ++i) {
    std::vector<std::byte> bad = good;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) bad[rng() % bad.size()] = static_cast<std::byte>(rng() & 0xff);
    if (rng() % 4 == 0) bad.resize(rng() % bad.size());  // truncated too
    try {
      const auto f = SafetensorsFile::parse(bad, "fuzz");
      std::size_t covered = 0;
      for (const auto& t : f.tensors()) covered += t.bytes.size();
      EXPECT_LE(covered, bad.size());  // every accepted view lies inside the bytes
      read++;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("safetensors fuzz"), std::string::npos) << e.what();
      refused++;
    }
  }
  EXPECT_GT(refused, 1000);
  RecordProperty("fuzz_refused", refused);
  RecordProperty("fuzz_read", read);
}
