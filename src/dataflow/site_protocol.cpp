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

MessageWriter& MessageWriter::putString(const std::string& s) {
  put(static_cast<std::uint32_t>(s.size()));
  const auto at = bytes_.size();
  bytes_.resize(at + s.size());
  if (!s.empty()) std::memcpy(bytes_.data() + at, s.data(), s.size());
  return *this;
}

MessageWriter& MessageWriter::putBlob(std::span<const std::byte> b) {
  put(static_cast<std::uint64_t>(b.size()));
  bytes_.insert(bytes_.end(), b.begin(), b.end());
  return *this;
}

const std::byte* MessageReader::need(std::size_t n, const char* field) {
  if (n > b_.size() - at_) {
    throw SiteProtocolError(fmt::format("malformed {} message: {} needs {} bytes at offset {}, {} left",
                                        kindName(kind_), field, n, at_, b_.size() - at_));
  }
  const std::byte* p = b_.data() + at_;
  at_ += n;
  return p;
}

std::string MessageReader::getString(const char* field) {
  const auto n = get<std::uint32_t>(field);
  const std::byte* p = need(n, field);
  return {reinterpret_cast<const char*>(p), n};
}

std::span<const std::byte> MessageReader::getBlob(const char* field) {
  const auto n = get<std::uint64_t>(field);
  if (n > b_.size() - at_) {
    throw SiteProtocolError(
        fmt::format("malformed {} message: {} claims {} bytes, {} left", kindName(kind_), field, n, b_.size() - at_));
  }
  const std::byte* p = need(static_cast<std::size_t>(n), field);
  return {p, static_cast<std::size_t>(n)};
}

std::uint32_t MessageReader::getCount(std::size_t min_item_bytes, const char* field) {
  const auto n = get<std::uint32_t>(field);
  if (min_item_bytes > 0 && n > (b_.size() - at_) / min_item_bytes) {
    throw SiteProtocolError(fmt::format("malformed {} message: {} = {} items cannot fit in {} bytes", kindName(kind_),
                                        field, n, b_.size() - at_));
  }
  return n;
}

void MessageReader::finish() const {
  if (at_ != b_.size()) {
    throw SiteProtocolError(fmt::format("malformed {} message: {} trailing bytes", kindName(kind_), b_.size() - at_));
  }
}

}  // namespace astraflow::site
