// The cross-site protocol's messages: every one round-trips, and hostile payloads (each
// truncation, trailing bytes, absurd counts, random mutations) end in a SiteProtocolError that
// names the message, never in a crash, an exception of another type or a misread.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "astraflow/core/byte_io.hpp"
#include "dataflow/site_protocol.hpp"

namespace astraflow::site {
namespace {

std::vector<std::byte> bytes(std::string_view s) {
  std::vector<std::byte> out;
  for (const char c : s) out.push_back(static_cast<std::byte>(c));
  return out;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The messages of one conversation, each with its kind and a decoder that re-encodes what it read,
// so a test can compare bytes: the format has one encoding per message.
struct Sample {
  std::uint32_t kind;
  std::vector<std::byte> payload;
  std::function<std::vector<std::byte>(std::span<const std::byte>)> decode_and_encode;
};

std::vector<Sample> samples() {
  static const auto record_a = bytes("ATRJ first record"), record_b = bytes("ATRJ second"), part = bytes("delta-part");
  std::vector<Sample> out;
  out.push_back({kHello, encode(Hello{"site_b", 3, {{"solver", 12345}, {"verifier", 678}}}),
                 [](auto p) { return encode(decodeHello(p)); }});
  out.push_back({kWelcome, encode(Welcome{{4, -1}}), [](auto p) { return encode(decodeWelcome(p)); }});
  out.push_back(
      {kRefuse, encode(Refuse{"policy 'x' is 10 bytes here"}), [](auto p) { return encode(decodeRefuse(p)); }});
  out.push_back({kCredit, encode(Credit{64}), [](auto p) { return encode(decodeCredit(p)); }});
  out.push_back({kTrajectories, encode(RecordList{{record_a, record_b}}),
                 [](auto p) { return encode(decodeRecordList(p, kTrajectories)); }});
  out.push_back({kPublished, encode(Published{1, 42}), [](auto p) { return encode(decodePublished(p)); }});
  out.push_back({kWeightRequest, encode(WeightRequest{1, 41, 0xfeedULL, 3, true}),
                 [](auto p) { return encode(decodeWeightRequest(p)); }});
  out.push_back({kWeightUpdate, encode(WeightUpdate{1, false, 42, 0xbeefULL, {part, part}}),
                 [](auto p) { return encode(decodeWeightUpdate(p)); }});
  return out;
}

TEST(SiteProtocol, EveryMessageRoundTrips) {
  const Hello hello{"site_b", 3, {{"solver", 12345}, {"verifier", 678}}};
  EXPECT_EQ(decodeHello(encode(hello)), hello);
  EXPECT_EQ(decodeWelcome(encode(Welcome{{4, -1, 9}})).published, (std::vector<std::int64_t>{4, -1, 9}));
  EXPECT_EQ(decodeRefuse(encode(Refuse{"no"})).reason, "no");
  EXPECT_EQ(decodeCredit(encode(Credit{77})).tasks, 77u);
  const auto a = bytes("record a"), b = bytes("");
  const auto list_bytes = encode(RecordList{{a, b}});
  const RecordList list = decodeRecordList(list_bytes, kTasks);
  ASSERT_EQ(list.records.size(), 2u);
  EXPECT_TRUE(std::equal(list.records[0].begin(), list.records[0].end(), a.begin(), a.end()));
  EXPECT_TRUE(list.records[1].empty());
  const auto pub = decodePublished(encode(Published{2, 17}));
  EXPECT_EQ(pub.policy, 2u);
  EXPECT_EQ(pub.version, 17);
  const auto req = decodeWeightRequest(encode(WeightRequest{1, -1, 99, 5, true}));
  EXPECT_EQ(req.policy, 1u);
  EXPECT_EQ(req.version, -1);
  EXPECT_EQ(req.hash, 99u);
  EXPECT_EQ(req.deltas_since_full, 5u);
  EXPECT_TRUE(req.full);
  const auto part = bytes("part bytes");
  const auto update_bytes = encode(WeightUpdate{0, true, 8, 7, {part}});
  const auto update = decodeWeightUpdate(update_bytes);
  EXPECT_TRUE(update.full);
  EXPECT_EQ(update.version, 8);
  EXPECT_EQ(update.hash, 7u);
  ASSERT_EQ(update.parts.size(), 1u);
  EXPECT_TRUE(std::equal(update.parts[0].begin(), update.parts[0].end(), part.begin(), part.end()));
  // Views, not copies: the part lies inside the payload it was decoded from.
  EXPECT_GE(update.parts[0].data(), update_bytes.data());
  EXPECT_LE(update.parts[0].data() + update.parts[0].size(), update_bytes.data() + update_bytes.size());
}

TEST(SiteProtocol, EveryTruncationAndTrailingByteIsRefusedByName) {
  for (const auto& s : samples()) {
    const std::string name = std::string("malformed ") + kindName(s.kind) + " message";
    for (std::size_t n = 0; n < s.payload.size(); ++n) {
      try {
        s.decode_and_encode(std::span(s.payload).first(n));
        ADD_FAILURE() << name << ": accepted a payload cut to " << n << " of " << s.payload.size() << " bytes";
      } catch (const SiteProtocolError& e) {
        EXPECT_TRUE(contains(e.what(), name)) << e.what();
      }
    }
    auto longer = s.payload;
    longer.push_back(std::byte{0});
    try {
      s.decode_and_encode(longer);
      ADD_FAILURE() << name << ": accepted a trailing byte";
    } catch (const SiteProtocolError& e) {
      EXPECT_TRUE(contains(e.what(), "1 trailing bytes")) << e.what();
    }
  }
}

TEST(SiteProtocol, AbsurdCountsAreRefusedBeforeAnythingIsAllocated) {
  // A record list claiming 2^32 − 1 records in 4 bytes, and a blob claiming 2^63 bytes.
  const auto many = ByteWriter().put(std::uint32_t{0xffffffff}).take();
  EXPECT_THROW(decodeRecordList(many, kTasks), SiteProtocolError);
  const auto huge = ByteWriter().put(std::uint32_t{1}).put(std::uint64_t{1} << 63).take();
  try {
    decodeRecordList(huge, kTrajectories);
    ADD_FAILURE() << "accepted a blob past the payload";
  } catch (const SiteProtocolError& e) {
    EXPECT_TRUE(contains(e.what(), "malformed trajectories message: record: blob of")) << e.what();
  }
  // A flag byte other than 0 or 1.
  auto request = encode(WeightRequest{0, 1, 2, 3, false});
  request.back() = std::byte{7};
  try {
    decodeWeightRequest(request);
    ADD_FAILURE() << "accepted full = 7";
  } catch (const SiteProtocolError& e) {
    EXPECT_TRUE(contains(e.what(), "full is 7 (must be 0 or 1)")) << e.what();
  }
}

// Any payload a decoder accepts re-encodes to the same bytes, so an accepted mutation is a real
// message; everything else is a SiteProtocolError (any other exception fails the test).
TEST(SiteProtocol, RandomMutationsNeverCrashOrMisread) {
  std::mt19937 rng(5);
  for (const auto& s : samples()) {
    int accepted = 0, refused = 0;
    for (int i = 0; i < 5000; ++i) {
      auto b = s.payload;
      const std::size_t at = rng() % b.size();
      b[at] = std::byte(std::uint8_t(std::uint8_t(b[at]) + 1 + rng() % 255));
      try {
        ASSERT_EQ(s.decode_and_encode(b), b) << kindName(s.kind) << ": accepted mutation at byte " << at;
        ++accepted;
      } catch (const SiteProtocolError&) {
        ++refused;
      }
    }
    EXPECT_EQ(accepted + refused, 5000) << kindName(s.kind);
  }
}

}  // namespace
}  // namespace astraflow::site
