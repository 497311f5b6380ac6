// Encoders and decoders of the home ↔ gateway messages (Hello, Welcome, Credit, Tasks, WeightUpdate, ...), every field
// read through ByteReader so that a malformed message is a SiteProtocolError; also resolveToken and splitHostPort.
#include "dataflow/site_protocol.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace astraflow::site {

const char* kindName(std::uint32_t kind) {
  switch (kind) {
    case kHello: return "hello";
    case kWelcome: return "welcome";
    case kRefuse: return "refuse";
    case kCredit: return "credit";
    case kTasks: return "tasks";
    case kTrajectories: return "trajectories";
    case kPublished: return "published";
    case kWeightRequest: return "weight request";
    case kWeightUpdate: return "weight update";
    case kEnd: return "end";
    case kBye: return "bye";
  }
  return "unknown";
}

std::string resolveToken(const CrossSiteSection& c) {
  if (!c.token_env.empty()) {
    if (const char* v = std::getenv(c.token_env.c_str()); v && *v) return v;
  }
  if (!c.token.empty()) return c.token;
  throw ConfigError(
      fmt::format("cross_site: no shared token; set the environment variable {} (cross_site.token_env) "
                  "or cross_site.token, the same at both sites",
                  c.token_env.empty() ? "named by cross_site.token_env" : c.token_env));
}

std::pair<std::string, std::uint16_t> splitHostPort(const std::string& address) {
  const auto colon = address.rfind(':');
  return {address.substr(0, colon), static_cast<std::uint16_t>(std::stoul(address.substr(colon + 1)))};
}

namespace {

// Reads one message; every failure becomes a SiteProtocolError naming it.
class Decoder {
 public:
  Decoder(std::span<const std::byte> payload, std::uint32_t kind)
      : what_(fmt::format("malformed {} message", kindName(kind))), in_(payload, what_) {}

  template <ByteScalar T>
  T get(const char* field) {
    T v{};
    check(in_.get(v, field));
    return v;
  }
  std::string getString(const char* field) {
    std::string s;
    check(in_.getString(s, field));
    return s;
  }
  std::span<const std::byte> getBlob(const char* field) {
    std::span<const std::byte> b;
    check(in_.getBlob(b, field));
    return b;
  }
  // A u8 that must be 0 or 1, so every message has exactly one encoding.
  bool getFlag(const char* field) {
    const auto v = get<std::uint8_t>(field);
    if (v > 1) throw SiteProtocolError(fmt::format("{}: {} is {} (must be 0 or 1)", what_, field, v));
    return v == 1;
  }
  std::uint32_t getCount(std::size_t min_item_bytes, const char* field) {
    std::uint32_t n = 0;
    check(in_.getCount(n, min_item_bytes, field));
    return n;
  }
  void finish() { check(in_.finish()); }

 private:
  void check(bool ok) const {
    if (!ok) throw SiteProtocolError(in_.error());
  }
  std::string what_;  // before in_: it holds a view of this
  ByteReader in_;
};

}  // namespace

std::vector<std::byte> encode(const Hello& m) {
  ByteWriter out;
  out.putString(m.site).put(m.rollout_ranks).put(static_cast<std::uint32_t>(m.policies.size()));
  for (const auto& p : m.policies) out.putString(p.name).put(p.version_bytes);
  return out.take();
}

Hello decodeHello(std::span<const std::byte> payload) {
  Decoder in(payload, kHello);
  Hello m;
  m.site = in.getString("site");
  m.rollout_ranks = in.get<std::uint32_t>("rollout ranks");
  const auto n = in.getCount(12, "policies");
  for (std::uint32_t i = 0; i < n; ++i) {
    PolicyOffer p;
    p.name = in.getString("policy");
    p.version_bytes = in.get<std::uint64_t>("version bytes");
    m.policies.push_back(std::move(p));
  }
  in.finish();
  return m;
}

std::vector<std::byte> encode(const Welcome& m) {
  ByteWriter out;
  out.put(static_cast<std::uint32_t>(m.published.size()));
  for (const auto v : m.published) out.put(v);
  return out.take();
}

Welcome decodeWelcome(std::span<const std::byte> payload) {
  Decoder in(payload, kWelcome);
  Welcome m;
  const auto n = in.getCount(8, "policies");
  for (std::uint32_t i = 0; i < n; ++i) m.published.push_back(in.get<std::int64_t>("published"));
  in.finish();
  return m;
}

std::vector<std::byte> encode(const Refuse& m) { return ByteWriter().putString(m.reason).take(); }

Refuse decodeRefuse(std::span<const std::byte> payload) {
  Decoder in(payload, kRefuse);
  Refuse m{in.getString("reason")};
  in.finish();
  return m;
}

std::vector<std::byte> encode(const Credit& m) { return ByteWriter().put(m.tasks).take(); }

Credit decodeCredit(std::span<const std::byte> payload) {
  Decoder in(payload, kCredit);
  Credit m{in.get<std::uint32_t>("credits")};
  in.finish();
  return m;
}

std::vector<std::byte> encode(const RecordList& m) {
  ByteWriter out;
  out.put(static_cast<std::uint32_t>(m.records.size()));
  for (const auto& r : m.records) out.putBlob(r);
  return out.take();
}

RecordList decodeRecordList(std::span<const std::byte> payload, std::uint32_t kind) {
  Decoder in(payload, kind);
  RecordList m;
  const auto n = in.getCount(8, "records");
  m.records.reserve(n);  // bounded by the check: at most payload / 8
  for (std::uint32_t i = 0; i < n; ++i) m.records.push_back(in.getBlob("record"));
  in.finish();
  return m;
}

std::vector<std::byte> encode(const Published& m) { return ByteWriter().put(m.policy).put(m.version).take(); }

Published decodePublished(std::span<const std::byte> payload) {
  Decoder in(payload, kPublished);
  Published m;
  m.policy = in.get<std::uint32_t>("policy");
  m.version = in.get<std::int64_t>("version");
  in.finish();
  return m;
}

std::vector<std::byte> encode(const WeightRequest& m) {
  return ByteWriter()
      .put(m.policy)
      .put(m.version)
      .put(m.hash)
      .put(m.deltas_since_full)
      .put(static_cast<std::uint8_t>(m.full))
      .take();
}

WeightRequest decodeWeightRequest(std::span<const std::byte> payload) {
  Decoder in(payload, kWeightRequest);
  WeightRequest m;
  m.policy = in.get<std::uint32_t>("policy");
  m.version = in.get<std::int64_t>("version");
  m.hash = in.get<std::uint64_t>("hash");
  m.deltas_since_full = in.get<std::uint32_t>("deltas since full");
  m.full = in.getFlag("full");
  in.finish();
  return m;
}

std::vector<std::byte> encode(const WeightUpdate& m) {
  ByteWriter out;
  out.put(m.policy).put(static_cast<std::uint8_t>(m.full)).put(m.version).put(m.hash);
  out.put(static_cast<std::uint32_t>(m.parts.size()));
  for (const auto& part : m.parts) out.putBlob(part);
  return out.take();
}

WeightUpdate decodeWeightUpdate(std::span<const std::byte> payload) {
  Decoder in(payload, kWeightUpdate);
  WeightUpdate m;
  m.policy = in.get<std::uint32_t>("policy");
  m.full = in.getFlag("full");
  m.version = in.get<std::int64_t>("version");
  m.hash = in.get<std::uint64_t>("hash");
  const auto n = in.getCount(8, "parts");
  for (std::uint32_t i = 0; i < n; ++i) m.parts.push_back(in.getBlob("part"));
  in.finish();
  return m;
}

}  // namespace astraflow::site
