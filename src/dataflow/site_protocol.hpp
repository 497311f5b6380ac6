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
// Every field is read through core's ByteReader: a malformed message is a SiteProtocolError naming
// the message and field, and the link is dropped (its tasks re-issued), never a crash.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "astraflow/core/byte_io.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"

namespace astraflow::site {

// Bumped whenever a message changes; the UCX handshake refuses a gateway that speaks another.
// 2: the link's authenticated handshake and tagged frames (include/astraflow/comm/ucx.hpp).
inline constexpr std::uint32_t kProtocolVersion = 2;

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

// The messages, typed. Record lists and weight parts are views into the frame they were
// decoded from (no copy): they live as long as that frame's payload.
struct PolicyOffer {
  std::string name;
  std::uint64_t version_bytes = 0;  // bytes of one full version: the model configs must agree

  bool operator==(const PolicyOffer&) const = default;
};
struct Hello {
  std::string site;
  std::uint32_t rollout_ranks = 0;
  std::vector<PolicyOffer> policies;  // in the gateway's order; home requires its own

  bool operator==(const Hello&) const = default;
};
struct Welcome {
  std::vector<std::int64_t> published;  // home's newest version per policy, in home order
};
struct Refuse {
  std::string reason;
};
struct Credit {
  std::uint32_t tasks = 0;  // the gateway can take this many more
};
struct RecordList {  // kTasks and kTrajectories: complete wire records
  std::vector<std::span<const std::byte>> records;
};
struct Published {
  std::uint32_t policy = 0;  // index in home order
  std::int64_t version = -1;
};
struct WeightRequest {
  std::uint32_t policy = 0;
  std::int64_t version = -1;  // what the gateway's mirror holds
  std::uint64_t hash = 0;
  std::uint32_t deltas_since_full = 0;
  bool full = false;  // ask for a full version (its last delta was rejected)
};
struct WeightUpdate {
  std::uint32_t policy = 0;
  bool full = false;
  std::int64_t version = -1;
  std::uint64_t hash = 0;
  std::vector<std::span<const std::byte>> parts;  // the deltas in order, or one full version; none: already current
};

std::vector<std::byte> encode(const Hello& m);
std::vector<std::byte> encode(const Welcome& m);
std::vector<std::byte> encode(const Refuse& m);
std::vector<std::byte> encode(const Credit& m);
std::vector<std::byte> encode(const RecordList& m);
std::vector<std::byte> encode(const Published& m);
std::vector<std::byte> encode(const WeightRequest& m);
std::vector<std::byte> encode(const WeightUpdate& m);

// Each reads exactly one message's payload through ByteReader and throws SiteProtocolError
// ("malformed <kind> message: ...", naming the field and offset) on anything else: truncation,
// a count that cannot fit, trailing bytes.
Hello decodeHello(std::span<const std::byte> payload);
Welcome decodeWelcome(std::span<const std::byte> payload);
Refuse decodeRefuse(std::span<const std::byte> payload);
Credit decodeCredit(std::span<const std::byte> payload);
RecordList decodeRecordList(std::span<const std::byte> payload, std::uint32_t kind);
Published decodePublished(std::span<const std::byte> payload);
WeightRequest decodeWeightRequest(std::span<const std::byte> payload);
WeightUpdate decodeWeightUpdate(std::span<const std::byte> payload);

}  // namespace astraflow::site
