#pragma once
// The messages between a home dataflow rank and a remote site's gateway (docs/cross-site.md),
// carried as UCX frames (include/astraflow/comm/ucx.hpp: kind + payload). Private to src/dataflow.
//
//   gateway → home  Hello {site, rollout ranks, policies served: (name, version bytes)}
//   home → gateway  Welcome {published version per policy, home order} | Refuse {reason}
//   gateway → home  Credit {n}: it can take n more tasks
//   home → gateway  Tasks {task records}            gateway → home  Trajectories {records}
//   home → gateway  Published {policy, version}     gateway → home  WeightRequest {policy, have, hash, deltas, full?}
//   home → gateway  WeightUpdate {policy, full, version, hash, parts: the deltas in order or one full version}
//   home → gateway  End: end every local stream     gateway → home  Bye: all its ranks ended
// Every field is read through a bounds-checked reader: a malformed message is a SiteProtocolError
// naming the message and field, and the link is dropped (its tasks re-issued), never a crash.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"

namespace astraflow::site {

// Bumped whenever a message changes; the UCX handshake refuses a gateway that speaks another.
inline constexpr std::uint32_t kProtocolVersion = 1;

enum Kind : std::uint32_t {
  kHello = 1,
  kWelcome,
  kRefuse,
  kCredit,
  kTasks,
  kTrajectories,
  kPublished,
  kWeightRequest,
  kWeightUpdate,
  kEnd,
  kBye,
};

const char* kindName(std::uint32_t kind);

// The shared secret: the environment variable cross_site.token_env when set and non-empty, else
// cross_site.token. Throws ConfigError naming both keys when neither gives one.
std::string resolveToken(const CrossSiteSection& c);
// "host:port" (validated by the config parser) → host, port.
std::pair<std::string, std::uint16_t> splitHostPort(const std::string& address);

class SiteProtocolError : public Error {
 public:
  using Error::Error;
};

class MessageWriter {
 public:
  template <class T>
  MessageWriter& put(T v) {
    const auto at = bytes_.size();
    bytes_.resize(at + sizeof v);
    std::memcpy(bytes_.data() + at, &v, sizeof v);
    return *this;
  }
  MessageWriter& putString(const std::string& s);
  MessageWriter& putBlob(std::span<const std::byte> b);  // u64 length + bytes
  std::span<const std::byte> bytes() const { return bytes_; }
  void clear() { bytes_.clear(); }

 private:
  std::vector<std::byte> bytes_;
};

class MessageReader {
 public:
  MessageReader(std::span<const std::byte> b, std::uint32_t kind) : b_(b), kind_(kind) {}
  template <class T>
  T get(const char* field) {
    T v;
    std::memcpy(&v, need(sizeof v, field), sizeof v);
    return v;
  }
  std::string getString(const char* field);
  std::span<const std::byte> getBlob(const char* field);
  // A count of items each at least min_item_bytes long, refused when they cannot fit.
  std::uint32_t getCount(std::size_t min_item_bytes, const char* field);
  void finish() const;  // throws when bytes are left over

 private:
  const std::byte* need(std::size_t n, const char* field);
  std::span<const std::byte> b_;
  std::uint32_t kind_;
  std::size_t at_ = 0;
};

}  // namespace astraflow::site
