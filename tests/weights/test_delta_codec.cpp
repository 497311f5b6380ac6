// Sparse bf16 delta codec: bit-exact round trips at every density, special bit patterns, the
// size target at ~1 % density, and rejection (blob untouched) of corrupt, truncated,
// wrong-base and crafted deltas.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "astraflow/weights/delta_codec.hpp"
#include "astraflow/weights/weight_store.hpp"

using namespace astraflow;

namespace {

using Words = std::vector<std::uint16_t>;

std::span<const std::byte> bytesOf(const Words& w) { return std::as_bytes(std::span(w)); }
std::span<std::byte> bytesOf(Words& w) { return std::as_writable_bytes(std::span(w)); }

// Plausible bf16 weights: random sign, exponents around 2^-7..2^0.
Words randomWeights(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Words w(n);
  for (auto& x : w) x = static_cast<std::uint16_t>((rng() & 0x8000u) | ((0x78u + rng() % 8) << 7) | (rng() & 0x7fu));
  return w;
}

// Changes a `density` share of the words: an optimiser-like step of ±1..3 units in the last
// place, or (`random_values`) an arbitrary new bit pattern.
Words perturb(const Words& base, double density, std::uint32_t seed, bool random_values = false) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution pick(density);
  Words w = base;
  for (auto& x : w) {
    if (!pick(rng)) continue;
    const std::uint16_t old = x;
    do {
      x = random_values ? static_cast<std::uint16_t>(rng())
                        : static_cast<std::uint16_t>(old + (rng() % 2 ? 1 : -1) * static_cast<int>(1 + rng() % 3));
    } while (x == old);
  }
  return w;
}

std::size_t countChanged(const Words& a, const Words& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

// Encodes base → target, applies it to a copy of base, and checks the copy equals target.
DeltaSummary roundTrip(const Words& base, const Words& target, bool zstd) {
  std::vector<std::byte> delta;
  const DeltaSummary enc = encodeDelta(bytesOf(base), bytesOf(target), 7, 8, delta, {.zstd = zstd});
  EXPECT_EQ(enc.changed, countChanged(base, target));
  Words replica = base;
  const DeltaSummary dec = applyDelta(bytesOf(replica), 7, weightsHash(bytesOf(base)), delta);
  EXPECT_EQ(dec.changed, enc.changed);
  EXPECT_EQ(dec.target_version, 8);
  EXPECT_TRUE(replica == target) << "applied delta is not bit-exact";
  return enc;
}

// Recomputes the payload checksum after a deliberate edit, so only the structural checks stand
// between a crafted delta and the blob.
void resealPayload(std::vector<std::byte>& delta) {
  XXH3_state_t* s = XXH3_createState();
  XXH3_64bits_reset(s);
  XXH3_64bits_update(s, delta.data(), 80);
  XXH3_64bits_update(s, delta.data() + kDeltaHeaderBytes, delta.size() - kDeltaHeaderBytes);
  const std::uint64_t h = XXH3_64bits_digest(s);
  XXH3_freeState(s);
  std::memcpy(delta.data() + 80, &h, 8);
}

constexpr std::size_t kWords = 3 * kDeltaChunkElements + 12345;  // a ragged last chunk

}  // namespace

TEST(DeltaCodec, RoundTripsBitExactlyAtEveryDensity) {
  const Words base = randomWeights(kWords, 1);
  for (double density : {0.0, 0.001, 0.01, 0.5, 1.0}) {
    for (bool random_values : {false, true}) {
      for (bool zstd : {false, true}) {
        SCOPED_TRACE(testing::Message() << "density " << density << " random " << random_values << " zstd " << zstd);
        const Words target = perturb(base, density, 2, random_values);
        const DeltaSummary s = roundTrip(base, target, zstd);
        if (density == 0.0) {
          EXPECT_EQ(s.changed, 0u);
        } else if (density == 1.0) {
          EXPECT_EQ(s.changed, kWords);
        }
      }
    }
  }
}

TEST(DeltaCodec, ChangesAtChunkEdgesAndEnds) {
  const Words base = randomWeights(kWords, 3);
  Words target = base;
  for (std::size_t i : {std::size_t{0}, std::size_t{1}, std::size_t{kDeltaChunkElements - 1},
                        std::size_t{kDeltaChunkElements}, std::size_t{2 * kDeltaChunkElements + 3}, kWords - 1}) {
    target[i] ^= 0x4001;
  }
  EXPECT_EQ(roundTrip(base, target, false).changed, 6u);
  // A blob shorter than one chunk, and one of a single word.
  const Words small = randomWeights(5, 4);
  Words small2 = small;
  small2[4] ^= 1;
  EXPECT_EQ(roundTrip(small, small2, false).changed, 1u);
  EXPECT_EQ(roundTrip(Words{0x3f80}, Words{0xbf80}, true).changed, 1u);
}

TEST(DeltaCodec, SpecialBitPatternsSurvive) {
  // +0, −0, +inf, −inf, quiet NaN, signalling-style NaN, NaN with payload, the largest finite.
  const Words specials = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffff, 0x7f7f};
  Words base(specials.size() * specials.size()), target(base.size());
  for (std::size_t i = 0; i < specials.size(); ++i) {
    for (std::size_t j = 0; j < specials.size(); ++j) {
      base[i * specials.size() + j] = specials[i];
      target[i * specials.size() + j] = specials[j];  // every transition between them
    }
  }
  for (bool zstd : {false, true}) roundTrip(base, target, zstd);
}

TEST(DeltaCodec, AboutThreeBytesPerChangedElementAtOnePercent) {
  const Words base = randomWeights(16 * kDeltaChunkElements, 5);
  const Words target = perturb(base, 0.01, 6);
  std::vector<std::byte> delta;
  const DeltaSummary s = encodeDelta(bytesOf(base), bytesOf(target), 0, 1, delta);
  const double per_changed = static_cast<double>(s.bytes) / static_cast<double>(s.changed);
  EXPECT_LE(per_changed, 3.0) << s.bytes << " bytes for " << s.changed << " changes";
  EXPECT_LT(s.bytes, base.size() * 2 / 20) << "a 1 % delta must be far smaller than the full version";
}

// The encode and the apply split the chunks over threads: any thread count (fewer chunks than
// threads, a ragged last chunk, slices of unequal size) writes the same bytes as one thread, and
// a malformed chunk in the last slice still stops the apply before anything is written.
TEST(DeltaCodec, ThreadsWriteTheSameDeltaAndApplyIt) {
  for (std::size_t words : {std::size_t{1000}, 5 * std::size_t{kDeltaChunkElements} + 777}) {
    const Words base = randomWeights(words, 21);
    const Words target = perturb(base, 0.01, 22);
    const std::uint64_t base_hash = weightsHash(bytesOf(base));
    std::vector<std::byte> one;
    encodeDelta(bytesOf(base), bytesOf(target), 0, 1, one, {.threads = 1});
    for (unsigned threads : {2u, 3u, 4u, 64u}) {
      std::vector<std::byte> many, zipped;
      const DeltaSummary s = encodeDelta(bytesOf(base), bytesOf(target), 0, 1, many, {.threads = threads});
      EXPECT_TRUE(many == one) << words << " words, " << threads << " threads";
      EXPECT_EQ(s.changed, countChanged(base, target));
      encodeDelta(bytesOf(base), bytesOf(target), 0, 1, zipped, {.zstd = true, .threads = threads});
      for (const auto* delta : {&many, &zipped}) {
        Words replica = base;
        applyDelta(bytesOf(replica), 0, base_hash, *delta, threads);
        EXPECT_TRUE(replica == target) << words << " words, " << threads << " threads: not bit-exact";
      }
    }
    // The last changed entry made to point past its chunk: refused, replica untouched.
    std::vector<std::byte> bad = one;
    bad.back() = std::byte{0xff};
    resealPayload(bad);
    Words replica = base;
    EXPECT_THROW(applyDelta(bytesOf(replica), 0, base_hash, bad, 3), DeltaError);
    EXPECT_TRUE(replica == base);
  }
}

TEST(DeltaCodec, CorruptDeltasAreRejectedAndNeverApplied) {
  const Words base = randomWeights(kWords, 7);
  const Words target = perturb(base, 0.02, 8);
  const std::uint64_t base_hash = weightsHash(bytesOf(base));
  for (bool zstd : {false, true}) {
    std::vector<std::byte> delta;
    encodeDelta(bytesOf(base), bytesOf(target), 3, 4, delta, {.zstd = zstd});
    auto expectRejected = [&](const std::vector<std::byte>& bad, std::int64_t version, std::uint64_t hash,
                              const char* what) {
      Words replica = base;
      EXPECT_THROW(applyDelta(bytesOf(replica), version, hash, bad), DeltaError) << what;
      EXPECT_TRUE(replica == base) << what << ": the replica was modified";
    };
    // A flipped bit anywhere: header, checksum field, chunk index, entries.
    for (std::size_t at : {std::size_t{2}, std::size_t{30}, std::size_t{84}, kDeltaHeaderBytes + 3, delta.size() / 2,
                           delta.size() - 1}) {
      auto bad = delta;
      bad[at] ^= std::byte{0x10};
      expectRejected(bad, 3, base_hash, "flipped byte");
    }
    for (std::size_t keep : {std::size_t{0}, std::size_t{40}, kDeltaHeaderBytes, delta.size() - 1}) {
      expectRejected(std::vector<std::byte>(delta.begin(), delta.begin() + static_cast<std::ptrdiff_t>(keep)), 3,
                     base_hash, "truncated");
    }
    expectRejected(delta, 2, base_hash, "wrong base version");
    expectRejected(delta, 3, base_hash ^ 1, "wrong base checksum");
    Words shorter(base.begin(), base.end() - 2);
    EXPECT_THROW(applyDelta(bytesOf(shorter), 3, weightsHash(bytesOf(shorter)), delta), DeltaError);
  }
  // Crafted: a valid checksum over entries that point past their chunk.
  std::vector<std::byte> delta;
  encodeDelta(bytesOf(base), bytesOf(target), 3, 4, delta);
  const std::size_t first_entry = kDeltaHeaderBytes + 8 * (kWords / kDeltaChunkElements + 2);
  delta[first_entry] = std::byte{0xff};  // a gap varint that never ends within 3 bytes
  delta[first_entry + 1] = std::byte{0xff};
  delta[first_entry + 2] = std::byte{0xff};
  resealPayload(delta);
  Words replica = base;
  EXPECT_THROW(applyDelta(bytesOf(replica), 3, base_hash, delta), DeltaError);
  EXPECT_TRUE(replica == base);
}

TEST(DeltaCodec, WrongResultIsDetectedAfterApplying) {
  // Same version and claimed checksum but different contents (a replica that went bad in
  // memory): the target checksum catches it.
  const Words base = randomWeights(1000, 9);
  const Words target = perturb(base, 0.1, 10);
  std::vector<std::byte> delta;
  encodeDelta(bytesOf(base), bytesOf(target), 0, 1, delta);
  Words drifted = base;
  drifted[500] ^= 0x0100;
  try {
    applyDelta(bytesOf(drifted), 0, weightsHash(bytesOf(base)), delta);
    FAIL() << "a drifted replica must fail the target checksum";
  } catch (const DeltaError& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch after applying"), std::string::npos) << e.what();
  }
}

// A gateway's path (weights/weight_store.hpp applyStoreUpdate): an update from another site is
// applied only when every part passes; a bad one leaves the replica marked for a full version.
TEST(DeltaCodec, StoreUpdatesFromAnotherSite) {
  const Words v0 = randomWeights(5000, 11), v1 = perturb(v0, 0.02, 12), v2 = perturb(v1, 0.02, 13);
  std::vector<std::byte> d1, d2;
  encodeDelta(bytesOf(v0), bytesOf(v1), 0, 1, d1);
  const DeltaSummary s2 = encodeDelta(bytesOf(v1), bytesOf(v2), 1, 2, d2);
  WeightReplica r;
  applyStoreUpdate(r, true, 0, weightsHash(bytesOf(v0)), {bytesOf(v0)});
  EXPECT_EQ(r.version, 0);
  applyStoreUpdate(r, false, 2, s2.target_hash, {d1, d2});
  EXPECT_EQ(r.version, 2);
  EXPECT_EQ(r.deltas_since_full, 2);
  EXPECT_TRUE(std::equal(r.blob.begin(), r.blob.end(), bytesOf(v2).begin()));
  // A full version whose checksum does not match: refused, the replica untouched.
  EXPECT_THROW(applyStoreUpdate(r, true, 3, 12345, {bytesOf(v0)}), DeltaError);
  EXPECT_EQ(r.version, 2);
  // A corrupt delta: refused, and the replica now needs a full version.
  WeightReplica q;
  applyStoreUpdate(q, true, 0, weightsHash(bytesOf(v0)), {bytesOf(v0)});
  auto bad = d1;
  bad[bad.size() / 2] ^= std::byte{1};
  EXPECT_THROW(applyStoreUpdate(q, false, 1, weightsHash(bytesOf(v1)), {bad}), DeltaError);
  EXPECT_EQ(q.version, -1);
  // Deltas that end short of the announced version: refused.
  WeightReplica p;
  applyStoreUpdate(p, true, 0, weightsHash(bytesOf(v0)), {bytesOf(v0)});
  EXPECT_THROW(applyStoreUpdate(p, false, 2, s2.target_hash, {d1}), DeltaError);
  EXPECT_EQ(p.version, -1);
}
