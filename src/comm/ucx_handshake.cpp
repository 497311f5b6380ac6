// The link's handshake, protocol version 2: a mutual challenge-response on fresh nonces, keyed
// by the shared token, which never crosses the wire (the computation: link_auth.hpp).
//
//   client → server  Hello     {magic, version u32, client max u64, nonce: u32 32 + 32 bytes}
//   server → client  Challenge {magic, server max u64, server nonce [32], server proof [32]}
//   client → server  Response  {magic, verdict u32 (1: the server's proof verified), client proof [32]}
//   server → client  Welcome   {magic, accepted u32, server max u64, reason: u32 + bytes}
//
// A server refuses with a Welcome (accepted 0) at once when the hello is not one or speaks
// another version: the Hello and the Welcome keep version 1's layout (its token string is
// where the nonce is now), so a version-1 peer gets "protocol version 1, this side speaks 2"
// rather than a parse error. A client whose check of the server's proof fails says so in its
// Response (verdict 0, no proof: it gives nothing computed with its key to a server that has
// not proved it holds the key), so the server logs and counts the refusal too. After an
// accepting Welcome both sides tag every frame with the session key (ucx_connection.cpp).
#include "comm/ucx_handshake.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "comm/ucx_detail.hpp"

namespace astraflow::ucx_detail {

namespace {

using link_auth::FrameAuthenticator;
using link_auth::Tag;
using link_auth::Transcript;

constexpr std::uint32_t kProofVerified = 1;
constexpr std::uint32_t kProofRefused = 0;
const char* const kAuthenticationFailed = "authentication failed";

std::span<const std::byte> keyBytes(const std::string& token) {
  return std::as_bytes(std::span(token.data(), token.size()));
}

// A nonce or a proof: 32 bytes as they are.
bool getFixed(ByteReader& in, std::array<std::byte, 32>& out, const char* field) {
  std::span<const std::byte> b;
  if (!in.getBytes(b, out.size(), field)) return false;
  std::copy(b.begin(), b.end(), out.begin());
  return true;
}

HandshakeVerdict refuse(std::string reason, std::string detail = {}, bool keys_differ = false) {
  return {HandshakeVerdict::Outcome::Refused, std::move(reason), std::move(detail), keys_differ};
}

// The hello: the client's version, limit and nonce into `t`; a refusal when it is not usable.
HandshakeVerdict readHello(const UcxMessage& hello, const UcxLinkOptions& options, Transcript& t) {
  ByteReader in(hello.payload, "UCX hello");
  std::uint32_t magic = 0, version = 0, nonce_bytes = 0;
  if (hello.kind != kHelloKind || !in.get(magic, "magic") || magic != kHandshakeMagic ||
      !in.get(version, "protocol version")) {
    return refuse("not an astraflow UCX hello");
  }
  // Before the rest: a peer of another version lays the rest out its own way.
  if (version != options.protocol_version) {
    return refuse(fmt::format("protocol version {}, this side speaks {}", version, options.protocol_version));
  }
  if (!in.get(t.client_max_message_bytes, "max message bytes") || !in.get(nonce_bytes, "nonce length") ||
      nonce_bytes != t.client_nonce.size() || !getFixed(in, t.client_nonce, "nonce") || !in.finish()) {
    return refuse("not an astraflow UCX hello");
  }
  return {HandshakeVerdict::Outcome::Accepted, {}, {}, false};
}

// The response to this side's challenge: accepted when its proof is the one the key gives.
HandshakeVerdict checkResponse(const UcxMessage& response, link_auth::HmacSha256& link_key, const Transcript& t) {
  ByteReader in(response.payload, "UCX handshake response");
  std::uint32_t magic = 0, verdict = 0;
  Tag proof{};
  if (response.kind != kResponseKind || !in.get(magic, "magic") || magic != kHandshakeMagic ||
      !in.get(verdict, "verdict") || !getFixed(in, proof, "proof") || !in.finish() ||
      (verdict != kProofVerified && verdict != kProofRefused)) {
    return refuse("not an astraflow UCX handshake response");
  }
  if (verdict == kProofRefused) {
    return refuse(kAuthenticationFailed,
                  "the client could not verify this side's proof: the two sides hold different keys", true);
  }
  if (!link_auth::tagsEqual(proof, link_auth::clientProof(link_key, t))) {
    return refuse(kAuthenticationFailed, "the client's proof does not verify: it does not hold this side's key", true);
  }
  return {HandshakeVerdict::Outcome::Accepted, {}, {}, false};
}

void sendWelcome(UcxConnection::Impl& conn, const UcxLinkOptions& options, const HandshakeVerdict& v,
                 const Deadline& deadline) {
  const bool accepted = v.outcome == HandshakeVerdict::Outcome::Accepted;
  ByteWriter welcome;
  welcome.put(kHandshakeMagic).put(accepted ? 1u : 0u).put(options.max_message_bytes).putString(v.reason);
  conn.sendFrame(kWelcomeKind, welcome.bytes(), deadline);
}

// ---- client -------------------------------------------------------------------------------

struct Welcome {
  bool accepted = false;
  std::uint64_t server_max = 0;
  std::string reason;
};

struct Challenge {
  std::uint64_t server_max = 0;
  link_auth::Nonce nonce{};
  Tag proof{};
};

[[noreturn]] void throwMalformedAnswer(UcxConnection::Impl& impl, const std::string& why) {
  spdlog::warn("closing UCX connection to {}: {}", impl.peer, why);
  impl.markClosed(why);
  throw UcxMalformedMessage(0, fmt::format("{}: UCX connect to {}: {}", processLocation(), impl.peer, why));
}

Welcome readWelcome(UcxConnection::Impl& impl, const UcxMessage& answer) {
  ByteReader in(answer.payload, "UCX handshake answer");
  std::uint32_t magic = 0, accepted = 0;
  Welcome w;
  if (answer.kind != kWelcomeKind || !in.get(magic, "magic") || magic != kHandshakeMagic ||
      !in.get(accepted, "accepted") || !in.get(w.server_max, "max message bytes") ||
      !in.getString(w.reason, "reason") || !in.finish()) {
    throwMalformedAnswer(impl, "the server's handshake answer is not an astraflow UCX answer");
  }
  w.accepted = accepted != 0;
  return w;
}

Challenge readChallenge(UcxConnection::Impl& impl, const UcxMessage& answer) {
  ByteReader in(answer.payload, "UCX handshake challenge");
  std::uint32_t magic = 0;
  Challenge c;
  if (answer.kind != kChallengeKind || !in.get(magic, "magic") || magic != kHandshakeMagic ||
      !in.get(c.server_max, "max message bytes") || !getFixed(in, c.nonce, "nonce") ||
      !getFixed(in, c.proof, "proof") || !in.finish()) {
    throwMalformedAnswer(impl, "the server's handshake answer is not an astraflow UCX answer");
  }
  return c;
}

// Sends one handshake frame and waits for the server's next one, naming what went wrong the way
// a caller of connectTo needs it (the server is unreachable, or silent).
UcxMessage exchange(UcxConnection::Impl& impl, std::uint32_t kind, std::span<const std::byte> payload,
                    const Deadline& deadline, double timeout_s) {
  try {
    impl.sendFrame(kind, payload, deadline);
    return impl.recvFrame(kMaxHandshakeBytes, deadline, "handshake answer");
  } catch (const UcxMalformedMessage&) {
    throw;
  } catch (const UcxConnectionClosed&) {
    throw UcxError(static_cast<int>(impl.fail_status), fmt::format("{}: cannot connect to UCX server {}: {}",
                                                                   processLocation(), impl.peer, impl.close_reason));
  } catch (const UcxTimeout&) {
    throw UcxTimeout(static_cast<int>(UCS_ERR_TIMED_OUT),
                     fmt::format("{}: UCX connect to {} got no handshake answer within {} s", processLocation(),
                                 impl.peer, timeout_s));
  }
}

[[noreturn]] void refusedByServer(UcxConnection::Impl& impl, const UcxLinkOptions& options, const std::string& reason) {
  // The server waits for this side to hang up after reading the reason.
  impl.close(options.close_timeout_s);
  throw UcxHandshakeRefused(
      fmt::format("{}: UCX server {} refused this client: {}", processLocation(), impl.peer, reason), reason);
}

}  // namespace

void requireLinkKey(const UcxLinkOptions& options) {
  if (options.token.empty()) {
    throw UcxError(0, fmt::format("{}: the UCX link token is empty: both sides need the same non-empty secret",
                                  processLocation()));
  }
}

HandshakeVerdict serverHandshake(UcxConnection::Impl& conn, const UcxLinkOptions& options, const Deadline& deadline) {
  HandshakeVerdict verdict;
  Transcript t;
  t.server_max_message_bytes = options.max_message_bytes;
  Tag session{};
  try {
    const UcxMessage hello = conn.recvFrame(kMaxHandshakeBytes, deadline, "handshake hello");
    verdict = readHello(hello, options, t);
    if (verdict.outcome == HandshakeVerdict::Outcome::Accepted) {
      link_auth::HmacSha256 link_key(keyBytes(options.token));
      t.server_nonce = link_auth::freshNonce();
      ByteWriter challenge;
      challenge.put(kHandshakeMagic).put(t.server_max_message_bytes).putBytes(t.server_nonce);
      challenge.putBytes(link_auth::serverProof(link_key, t));
      conn.sendFrame(kChallengeKind, challenge.bytes(), deadline);
      const UcxMessage response = conn.recvFrame(kMaxHandshakeBytes, deadline, "handshake response");
      verdict = checkResponse(response, link_key, t);
      if (verdict.outcome == HandshakeVerdict::Outcome::Accepted) session = link_auth::sessionKey(link_key, t);
    }
    sendWelcome(conn, options, verdict, deadline);
  } catch (const UcxError& e) {
    link_auth::wipe(session);
    return {HandshakeVerdict::Outcome::Dropped, {}, e.what(), false};
  }
  if (verdict.outcome == HandshakeVerdict::Outcome::Accepted) {
    conn.peer_max_message_bytes = t.client_max_message_bytes;
    conn.startAuthentication(session, FrameAuthenticator::Role::Server);
  }
  link_auth::wipe(session);
  return verdict;
}

UcxConnection connectClient(UcpWorker& worker, const std::string& host, std::uint16_t port,
                            const UcxLinkOptions& options, double timeout_s, ServerProofCheck check) {
  requireLinkKey(options);
  const Deadline deadline(timeout_s);
  const sockaddr_storage addr = resolveAddress(host, port);
  auto impl = std::make_unique<UcxConnection::Impl>(worker.raw(), sockaddrToString(addr), options);
  impl->createClientEndpoint(addr);
  link_auth::HmacSha256 link_key(keyBytes(options.token));

  Transcript t;
  t.client_nonce = link_auth::freshNonce();
  t.client_max_message_bytes = options.max_message_bytes;
  ByteWriter hello;
  hello.put(kHandshakeMagic).put(options.protocol_version).put(t.client_max_message_bytes);
  hello.put(static_cast<std::uint32_t>(t.client_nonce.size())).putBytes(t.client_nonce);
  const UcxMessage answer = exchange(*impl, kHelloKind, hello.bytes(), deadline, timeout_s);
  if (answer.kind == kWelcomeKind) {
    const Welcome w = readWelcome(*impl, answer);
    if (w.accepted) throwMalformedAnswer(*impl, "the server accepted this client without proving it holds the key");
    refusedByServer(*impl, options, w.reason);
  }
  const Challenge c = readChallenge(*impl, answer);
  t.server_nonce = c.nonce;
  t.server_max_message_bytes = c.server_max;

  const bool server_proved = link_auth::tagsEqual(c.proof, link_auth::serverProof(link_key, t));
  const bool give_proof = server_proved || check == ServerProofCheck::AnswerAnywayForTesting;
  ByteWriter response;
  response.put(kHandshakeMagic).put(give_proof ? kProofVerified : kProofRefused);
  response.putBytes(give_proof ? link_auth::clientProof(link_key, t) : Tag{});
  if (!give_proof) {
    spdlog::warn("UCX server {} failed authentication: its proof does not verify with this side's key; refusing it",
                 impl->peer);
    // The server's verdict is read before hanging up, so that the refusal reaches it (UCX drops
    // what a failed endpoint had not yet delivered); a server that says nothing is not waited for.
    try {
      exchange(*impl, kResponseKind, response.bytes(), deadline.capped(options.close_timeout_s), timeout_s);
    } catch (const UcxError& e) {
      spdlog::debug("UCX server {} refused: no verdict after the refusal: {}", impl->peer, e.what());
    }
    impl->close(options.close_timeout_s);
    throw UcxHandshakeRefused(fmt::format("{}: UCX server {} did not prove it holds the link key (another key, or not "
                                          "the server it claims to be): {}; refused",
                                          processLocation(), impl->peer, kAuthenticationFailed),
                              kAuthenticationFailed, /*by_server=*/false);
  }
  const Welcome w = readWelcome(*impl, exchange(*impl, kResponseKind, response.bytes(), deadline, timeout_s));
  if (!w.accepted) refusedByServer(*impl, options, w.reason);
  if (w.server_max != t.server_max_message_bytes) {
    throwMalformedAnswer(*impl, "the server's welcome announces another frame limit than its challenge");
  }
  impl->peer_max_message_bytes = t.server_max_message_bytes;
  Tag session = link_auth::sessionKey(link_key, t);
  impl->startAuthentication(session, FrameAuthenticator::Role::Client);
  link_auth::wipe(session);
  return ConnectionAccess::wrap(std::move(impl));
}

}  // namespace astraflow::ucx_detail

namespace astraflow {

UcxConnection connectTo(UcpWorker& worker, const std::string& host, std::uint16_t port, const UcxLinkOptions& options,
                        double timeout_s) {
  return ucx_detail::connectClient(worker, host, port, options, timeout_s, ucx_detail::ServerProofCheck::Refuse);
}

}  // namespace astraflow
