// Weight blobs (what the weight store moves, and what a remote site's gateway decodes from the
// network): they round-trip bit-exactly, and a damaged blob — any truncation, trailing bytes, a
// random byte changed — is refused with an Error naming the blob, leaving the model untouched,
// or (a changed weight value) loads exactly what it says.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>
#include <string>

#include "astraflow/core/error.hpp"
#include "astraflow/model/policy_model.hpp"
#include "astraflow/model/weight_blob.hpp"
#include "test_model_config.hpp"

namespace astraflow {
namespace {

PolicyModel model(std::uint64_t seed) {
  torch::manual_seed(seed);
  return PolicyModel(test_support::tinyModel(20, 16, 1, 2, 1, 24, 16));
}

std::vector<std::byte> blobOf(const PolicyModel& m) {
  std::vector<std::byte> blob;
  packWeights(*m, blob);
  return blob;
}

TEST(WeightBlob, RoundTripsBitExactly) {
  auto a = model(1), b = model(2);
  const auto blob = blobOf(a);
  EXPECT_EQ(blob.size(), packedWeightBytes(*a));
  ASSERT_NE(blobOf(b), blob);
  unpackWeights(blob, *b);
  EXPECT_EQ(blobOf(b), blob);
}

TEST(WeightBlob, EveryTruncationAndTrailingByteIsRefusedAndChangesNothing) {
  auto source = model(1), target = model(2);
  const auto blob = blobOf(source), before = blobOf(target);
  for (std::size_t n = 0; n < blob.size(); n += 1 + n / 64) {  // every header byte, then sparser
    try {
      unpackWeights(std::span(blob).first(n), *target);
      ADD_FAILURE() << "accepted a blob cut to " << n << " of " << blob.size() << " bytes";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("weights blob"), std::string::npos) << e.what();
    }
  }
  auto longer = blob;
  longer.push_back(std::byte{0});
  EXPECT_THROW(unpackWeights(longer, *target), Error);
  EXPECT_EQ(blobOf(target), before);
}

// A mutation in the header or descriptors is refused (Error); one in the data is a different
// but well-formed version and must load exactly (re-packing gives the mutated bytes) unless it
// makes a value non-finite, which is refused too. Nothing else may happen.
TEST(WeightBlob, RandomMutationsAreRefusedOrLoadExactly) {
  const auto source = model(1);
  const auto good = blobOf(source);
  std::mt19937 rng(11);
  int loaded = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    auto b = good;
    const std::size_t at = rng() % b.size();
    b[at] = std::byte(std::uint8_t(std::uint8_t(b[at]) + 1 + rng() % 255));
    auto target = model(3);
    const auto before = blobOf(target);
    try {
      unpackWeights(b, *target);
      // Padding bytes are not data: a mutation there loads the original values.
      const auto after = blobOf(target);
      ASSERT_TRUE(after == b || after == good) << "mutation at byte " << at << " loaded something else";
      ++loaded;
    } catch (const Error&) {
      ASSERT_EQ(blobOf(target), before) << "a refused blob changed the model (byte " << at << ")";
      ++refused;
    }
  }
  EXPECT_GT(loaded, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace astraflow
