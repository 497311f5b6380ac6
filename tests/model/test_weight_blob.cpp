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

// An engine running bf16 on the CPU computes from the node's shared copy itself: its parameters
// become views into the blob (no copy), and it computes bit for bit what a model that copied
// the same version computes; when the blob's bytes change, so does what it computes.
TEST(WeightBlob, ViewedWeightsAreTheBlobAndComputeWhatACopyComputes) {
  auto source = model(1), copied = model(2), viewed = model(3), fp32 = model(4);
  copied->place(torch::kCPU, torch::kBFloat16);
  viewed->place(torch::kCPU, torch::kBFloat16);
  auto blob = blobOf(source);
  EXPECT_FALSE(canViewWeights(*fp32));
  EXPECT_THROW(viewWeights(blob, *fp32), Error);
  ASSERT_TRUE(canViewWeights(*viewed));
  unpackWeights(blob, *copied);
  viewWeights(blob, *viewed);
  const auto* lo = reinterpret_cast<const char*>(blob.data());
  for (const auto& p : viewed->orderedParameters()) {
    const auto* at = static_cast<const char*>(p.tensor.data_ptr());
    EXPECT_TRUE(at >= lo && at + p.tensor.nbytes() <= lo + blob.size()) << p.name << " is not inside the blob";
  }
  const auto tokens = torch::randint(0, 20, {2, 7}, torch::kLong);
  const auto positions = torch::arange(7, torch::kLong).unsqueeze(0).expand({2, 7}).contiguous();
  const auto valid = torch::ones({2, 7}, torch::kBool);
  torch::NoGradGuard no_grad;
  const auto want = copied->forward(tokens, positions, valid);
  EXPECT_TRUE(torch::equal(viewed->forward(tokens, positions, valid), want));
  // The blob is the weights: another version's bytes in the same memory change the output.
  const auto other = blobOf(model(5));
  ASSERT_EQ(other.size(), blob.size());
  std::copy(other.begin(), other.end(), blob.begin());
  EXPECT_FALSE(torch::equal(viewed->forward(tokens, positions, valid), want));
}

}  // namespace
}  // namespace astraflow
