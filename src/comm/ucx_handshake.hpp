#pragma once
// The link's handshake, both sides (ucx_handshake.cpp; the messages and what they prove:
// docs/cross-site.md, "The authenticated link"). Private to src/comm and its tests.
#include <cstdint>
#include <string>

#include "astraflow/comm/ucx.hpp"

namespace astraflow {

namespace ucx_detail {

class Deadline;

// Throws UcxError when the options carry no key (an empty token would authenticate nothing).
void requireLinkKey(const UcxLinkOptions& options);

// How one server-side handshake ended. Refused: the client was told `reason` and is waiting
// to read it; `detail` says more for this side's log (never anything about the key).
struct HandshakeVerdict {
  enum class Outcome { Accepted, Refused, Dropped };
  Outcome outcome = Outcome::Dropped;
  std::string reason;
  std::string detail;
  bool keys_differ = false;  // refused with "authentication failed"
};

// The server's side on a fresh endpoint: reads the hello, challenges, checks the response and
// sends the verdict; on acceptance the connection's frames are authenticated from then on.
// Never throws for anything the client does (Dropped, with the reason in `detail`).
HandshakeVerdict serverHandshake(UcxConnection::Impl& conn, const UcxLinkOptions& options, const Deadline& deadline);

// What a client does with a server whose proof does not verify. Every real client refuses it;
// tests answer it with a proof anyway, as an attacker would, to check that the server checks.
enum class ServerProofCheck { Refuse, AnswerAnywayForTesting };

// connectTo(), with the choice above.
UcxConnection connectClient(UcpWorker& worker, const std::string& host, std::uint16_t port,
                            const UcxLinkOptions& options, double timeout_s, ServerProofCheck check);

}  // namespace ucx_detail

}  // namespace astraflow
