// The authenticated link (docs/cross-site.md, "The authenticated link"). Without UCX: HMAC-SHA256
// against RFC 4231, the handshake proofs and session key bound to every input, frame tags that
// refuse replay, reordering, reflection, alteration and another key. Over UCX at 2 ranks
// (ucx_test_support.hpp: rank 0 server, rank 1 client): a client with another key, a client that
// ignores the server's proof, and a server with another key are refused, with the reason on
// both sides and no key in any log; frames captured from the link (sealFrameForTesting) and
// replayed, reordered, altered by one bit (as a tampered weight update would be), forged
// without the key, reflected back to their sender or copied onto another connection are refused
// before delivery, close the connection once as malformed, and are counted and logged with the
// peer's address.
#include <gtest/gtest.h>
#include <mpi.h>

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "comm/link_auth.hpp"
#include "comm/ucx_handshake.hpp"
#include "comm/ucx_test_support.hpp"

using namespace astraflow;
using namespace astraflow::ucx_test;
namespace la = astraflow::link_auth;

namespace {

std::span<const std::byte> bytesOf(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

std::string hex(const la::Tag& t) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const std::byte b : t) {
    out += digits[std::to_integer<int>(b) >> 4];
    out += digits[std::to_integer<int>(b) & 15];
  }
  return out;
}

la::Nonce nonceOf(std::uint8_t fill) {
  la::Nonce n;
  n.fill(static_cast<std::byte>(fill));
  return n;
}

const std::string kOtherToken = "s3cret-link-token-7f1d";  // kToken's length, one byte off

// The server's side of every frame test: the next incoming frame must not be delivered; the
// connection is closed, the failure reported once as UcxAuthenticationFailed, then as closed,
// counted, and logged with the peer's address.
void expectNextFrameRefused(UcxConnection& conn, const LogCapture& log) {
  const std::string peer = conn.peer();
  try {
    const UcxMessage m = conn.recv(kTimeout);
    ADD_FAILURE() << "a frame that should not verify was delivered (kind " << m.kind << ", " << m.payload.size()
                  << " bytes)";
    return;
  } catch (const UcxAuthenticationFailed& e) {
    EXPECT_NE(std::string(e.what()).find("failed authentication"), std::string::npos) << e.what();
  } catch (const UcxError& e) {
    ADD_FAILURE() << "refused, but not as an authentication failure: " << e.what();
    return;
  }
  EXPECT_FALSE(conn.isOpen());
  EXPECT_EQ(conn.authFailures(), 1u);
  EXPECT_NE(conn.closeReason().find("malformed frame"), std::string::npos) << conn.closeReason();
  const std::string logged = log.text();
  EXPECT_NE(logged.find("failed authentication"), std::string::npos) << logged;
  EXPECT_NE(logged.find(peer), std::string::npos) << "the warning names the peer " << peer << ": " << logged;
  for (int i = 0; i < 2; ++i) {
    try {
      conn.tryRecv();
      ADD_FAILURE() << "a closed connection returned";
    } catch (const UcxMalformedMessage& e) {
      ADD_FAILURE() << "reported as malformed more than once: " << e.what();
    } catch (const UcxConnectionClosed&) {
    }
  }
  EXPECT_EQ(conn.authFailures(), 1u);
}

// The client's side: the server dropped the link; this side sees it closed, not a timeout.
void expectDroppedByServer(UcxConnection& conn) {
  EXPECT_THROW(conn.recv(kTimeout), UcxConnectionClosed);
  EXPECT_FALSE(conn.isOpen());
}

class UcxAuth : public UcxLinkTest {};

}  // namespace

// ---- the cryptography, without UCX ---------------------------------------------------------

TEST(LinkAuth, HmacSha256MatchesRfc4231AndReadsItsPartsInPlace) {
  la::HmacSha256 jefe(bytesOf("Jefe"));  // RFC 4231 test case 2
  const std::string data = "what do ya want for nothing?";
  const std::string expected = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
  EXPECT_EQ(hex(jefe.compute({bytesOf(data)})), expected);
  // Split anywhere, with empty parts, and computed again on the same context: the same tag.
  EXPECT_EQ(hex(jefe.compute({bytesOf(data.substr(0, 7)), {}, bytesOf(data.substr(7))})), expected);
  la::HmacSha256 moved = std::move(jefe);
  EXPECT_EQ(hex(moved.compute({bytesOf(data)})), expected);

  const std::vector<std::byte> long_key(131, std::byte{0xaa});  // case 6: a key longer than a block
  la::HmacSha256 big(long_key);
  EXPECT_EQ(hex(big.compute({bytesOf("Test Using Larger Than Block-Size Key - Hash Key First")})),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");

  EXPECT_THROW(la::HmacSha256(std::span<const std::byte>()), UcxError) << "an empty key authenticates nothing";
  EXPECT_NE(la::freshNonce(), la::freshNonce());
  const la::Tag a = la::freshNonce();
  la::Tag b = a;
  EXPECT_TRUE(la::tagsEqual(a, b));
  b[31] ^= std::byte{1};
  EXPECT_FALSE(la::tagsEqual(a, b));
  EXPECT_FALSE(la::tagsEqual(a, std::span<const std::byte>(a).first(31)));
}

TEST(LinkAuth, ProofsAndSessionKeyDependOnEveryInputAndTheKey) {
  la::HmacSha256 key(bytesOf(kToken)), other(bytesOf(kOtherToken));
  la::Transcript t{nonceOf(1), nonceOf(2), 1000, 2000};
  const la::Tag server = la::serverProof(key, t), client = la::clientProof(key, t), session = la::sessionKey(key, t);
  EXPECT_EQ(server, la::serverProof(key, t));
  EXPECT_NE(server, client) << "a server's proof must not pass as a client's";
  EXPECT_NE(server, session);
  EXPECT_NE(client, session);
  EXPECT_NE(server, la::serverProof(other, t));
  EXPECT_NE(client, la::clientProof(other, t));
  EXPECT_NE(session, la::sessionKey(other, t));
  // Each input changed alone changes both proofs; the nonces also change the session key.
  for (int field = 0; field < 4; ++field) {
    la::Transcript u = t;
    if (field == 0) u.client_nonce[5] ^= std::byte{1};
    if (field == 1) u.server_nonce[31] ^= std::byte{0x80};
    if (field == 2) u.client_max_message_bytes += 1;
    if (field == 3) u.server_max_message_bytes -= 1;
    EXPECT_NE(la::serverProof(key, u), server) << "field " << field;
    EXPECT_NE(la::clientProof(key, u), client) << "field " << field;
    if (field < 2) {
      EXPECT_NE(la::sessionKey(key, u), session) << "field " << field;
    }
  }
  // The nonces are not interchangeable: a proof with them swapped is another proof.
  la::Transcript swapped = t;
  std::swap(swapped.client_nonce, swapped.server_nonce);
  EXPECT_NE(la::serverProof(key, swapped), server);
  EXPECT_NE(la::serverProof(key, swapped), client);
}

TEST(LinkAuth, FrameTagsRefuseReplayReorderReflectionAlterationAndAnotherKey) {
  la::HmacSha256 link_key(bytesOf(kToken));
  const la::Transcript t{nonceOf(3), nonceOf(4), 1 << 20, 1 << 20};
  const la::Tag session = la::sessionKey(link_key, t);
  la::FrameAuthenticator client(session, la::FrameAuthenticator::Role::Client);
  la::FrameAuthenticator server(session, la::FrameAuthenticator::Role::Server);
  const auto p0 = pattern(100, 1), p1 = pattern(10, 2), empty = std::vector<std::byte>();

  // The documented layout: HMAC(session, 'C' || sequence u64 || kind u32 || length u64 || payload).
  const la::Tag t0 = client.seal(1, p0);
  la::HmacSha256 session_mac(session);
  const std::uint64_t seq0 = 0, len0 = p0.size();
  const std::uint32_t kind1 = 1;
  const std::byte direction[] = {std::byte{la::FrameAuthenticator::kClientToServer}};
  EXPECT_EQ(t0, session_mac.compute({direction, std::as_bytes(std::span(&seq0, 1)), std::as_bytes(std::span(&kind1, 1)),
                                     std::as_bytes(std::span(&len0, 1)), p0}));

  const la::Tag t1 = client.seal(2, p1);
  const la::Tag t2 = client.seal(3, empty);
  EXPECT_EQ(client.framesSealed(), 3u);
  EXPECT_FALSE(server.open(2, p1, t1)) << "the second frame first (reordered)";
  EXPECT_TRUE(server.open(1, p0, t0));
  EXPECT_FALSE(server.open(1, p0, t0)) << "replayed";
  EXPECT_FALSE(server.open(4, p1, t1)) << "another kind";
  auto flipped = p1;
  flipped[9] ^= std::byte{0x04};
  EXPECT_FALSE(server.open(2, flipped, t1)) << "one bit of the payload changed";
  EXPECT_FALSE(server.open(2, std::span<const std::byte>(p1).first(9), t1)) << "truncated";
  la::Tag bad_tag = t1;
  bad_tag[0] ^= std::byte{1};
  EXPECT_FALSE(server.open(2, p1, bad_tag)) << "one bit of the tag changed";
  EXPECT_FALSE(server.open(2, p1, std::span<const std::byte>(t1).first(31))) << "a short tag";
  EXPECT_TRUE(server.open(2, p1, t1)) << "refusals do not move the sequence on";
  EXPECT_TRUE(server.open(3, empty, t2)) << "an empty payload is tagged too";
  EXPECT_EQ(server.framesOpened(), 3u);

  const la::Tag s0 = server.seal(9, p0);
  la::FrameAuthenticator server_again(session, la::FrameAuthenticator::Role::Server);
  EXPECT_FALSE(server_again.open(9, p0, s0)) << "a server's frame reflected back to a server";
  EXPECT_TRUE(client.open(9, p0, s0));

  la::HmacSha256 other_key(bytesOf(kOtherToken));
  la::FrameAuthenticator stranger(la::sessionKey(other_key, t), la::FrameAuthenticator::Role::Server);
  EXPECT_FALSE(stranger.open(1, p0, t0)) << "a session under another key";
  la::Transcript other_nonces = t;
  other_nonces.server_nonce[0] ^= std::byte{1};
  la::FrameAuthenticator other_session(la::sessionKey(link_key, other_nonces), la::FrameAuthenticator::Role::Server);
  EXPECT_FALSE(other_session.open(1, p0, t0)) << "a frame of another connection (other nonces)";
}

// ---- handshake refusals over UCX ------------------------------------------------------------

TEST_P(UcxAuth, ClientWithAnotherKeyIsRefusedOnBothSidesAndTheServerAcceptsTheNextClient) {
  LogCapture log;
  if (rank == kServer) {
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions());
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);  // the refused client does not end it
    EXPECT_EQ(listener.refusedCount(), 1u);
    EXPECT_EQ(listener.authFailures(), 1u);
    EXPECT_EQ(listener.lastRefusal(), "authentication failed");
    EXPECT_NE(log.text().find("refused client"), std::string::npos) << log.text();
    EXPECT_NE(log.text().find("authentication failed"), std::string::npos) << log.text();
    EXPECT_EQ(conn.recv(kTimeout).kind, 5u);
    conn.send(6, {});
  } else {
    const std::uint16_t port = sharePort(0);
    try {
      connectTo(*worker, "127.0.0.1", port, linkOptions(kOtherToken), kTimeout);
      ADD_FAILURE() << "a client with another key got through";
    } catch (const UcxHandshakeRefused& e) {
      // The client is first to see the keys differ: the server's proof does not verify here.
      EXPECT_EQ(e.reason(), "authentication failed");
      EXPECT_FALSE(e.byServer());
      EXPECT_EQ(std::string(e.what()).find(kOtherToken), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find(kToken), std::string::npos) << e.what();
    }
    UcxConnection conn = connectTo(*worker, "127.0.0.1", port, linkOptions(), kTimeout);
    conn.send(5, {});
    EXPECT_EQ(conn.recv(kTimeout).kind, 6u);
  }
  EXPECT_EQ(log.text().find(kToken), std::string::npos) << "the key leaked to the log";
  EXPECT_EQ(log.text().find(kOtherToken), std::string::npos) << "the other key leaked to the log";
}

// A client that answers whatever the server proved (as an attacker guessing would) is refused
// by the server's own check of its proof.
TEST_P(UcxAuth, ClientThatIgnoresTheServersProofIsRefusedByItsOwnProof) {
  LogCapture log;
  if (rank == kServer) {
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions());
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);
    EXPECT_EQ(listener.refusedCount(), 1u);
    EXPECT_EQ(listener.authFailures(), 1u);
    EXPECT_EQ(listener.lastRefusal(), "authentication failed");
    EXPECT_NE(log.text().find("proof does not verify"), std::string::npos) << log.text();
    EXPECT_EQ(conn.recv(kTimeout).kind, 5u);
    conn.send(6, {});
  } else {
    const std::uint16_t port = sharePort(0);
    try {
      ucx_detail::connectClient(*worker, "127.0.0.1", port, linkOptions(kOtherToken), kTimeout,
                                ucx_detail::ServerProofCheck::AnswerAnywayForTesting);
      ADD_FAILURE() << "a client without the key got through";
    } catch (const UcxHandshakeRefused& e) {
      EXPECT_EQ(e.reason(), "authentication failed");
      EXPECT_TRUE(e.byServer());
    }
    UcxConnection conn = connectTo(*worker, "127.0.0.1", port, linkOptions(), kTimeout);
    conn.send(5, {});
    EXPECT_EQ(conn.recv(kTimeout).kind, 6u);
  }
  EXPECT_EQ(log.text().find(kToken), std::string::npos) << "the key leaked to the log";
  EXPECT_EQ(log.text().find(kOtherToken), std::string::npos) << "the other key leaked to the log";
}

TEST_P(UcxAuth, ServerWithAnotherKeyIsRefusedByTheClient) {
  LogCapture log;
  if (rank == kServer) {
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions(kOtherToken));
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);  // the next client holds this server's key
    EXPECT_EQ(listener.refusedCount(), 1u);
    EXPECT_EQ(listener.authFailures(), 1u);
    // The client said it could not verify this side: it gave no proof of its own.
    EXPECT_NE(log.text().find("could not verify this side's proof"), std::string::npos) << log.text();
    EXPECT_EQ(conn.recv(kTimeout).kind, 5u);
    conn.send(6, {});
  } else {
    const std::uint16_t port = sharePort(0);
    try {
      connectTo(*worker, "127.0.0.1", port, linkOptions(), kTimeout);
      ADD_FAILURE() << "a server without the client's key was accepted by it";
    } catch (const UcxHandshakeRefused& e) {
      EXPECT_EQ(e.reason(), "authentication failed");
      EXPECT_FALSE(e.byServer()) << "this client refused the server";
      EXPECT_NE(std::string(e.what()).find("did not prove it holds the link key"), std::string::npos) << e.what();
    }
    EXPECT_NE(log.text().find("failed authentication"), std::string::npos) << log.text();
    UcxConnection conn = connectTo(*worker, "127.0.0.1", port, linkOptions(kOtherToken), kTimeout);
    conn.send(5, {});
    EXPECT_EQ(conn.recv(kTimeout).kind, 6u);
  }
  EXPECT_EQ(log.text().find(kToken), std::string::npos) << "the key leaked to the log";
  EXPECT_EQ(log.text().find(kOtherToken), std::string::npos) << "the other key leaked to the log";
}

// ---- frames captured from the link ----------------------------------------------------------

TEST_P(UcxAuth, ReplayedFrameIsRefused) {
  if (rank == kServer) {
    LogCapture log;
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions());
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);
    const UcxMessage first = conn.recv(kTimeout);  // the captured frame, sent once: it is good
    EXPECT_EQ(first.kind, 2u);
    EXPECT_TRUE(first.payload == pattern(1000, 2));
    expectNextFrameRefused(conn, log);  // the same bytes again
  } else {
    UcxConnection conn = connectTo(*worker, "127.0.0.1", sharePort(0), linkOptions(), kTimeout);
    const std::vector<std::byte> frame = conn.sealFrameForTesting(2, pattern(1000, 2));
    ASSERT_EQ(frame.size(), 12u + 1000u + 32u);
    conn.sendUnframedForTesting(frame);
    conn.sendUnframedForTesting(frame);
    expectDroppedByServer(conn);
  }
}

TEST_P(UcxAuth, ReorderedFramesAreRefused) {
  if (rank == kServer) {
    LogCapture log;
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions());
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);
    EXPECT_EQ(conn.recv(kTimeout).kind, 1u);
    expectNextFrameRefused(conn, log);
  } else {
    UcxConnection conn = connectTo(*worker, "127.0.0.1", sharePort(0), linkOptions(), kTimeout);
    conn.send(1, pattern(10, 1));
    const auto a = conn.sealFrameForTesting(3, pattern(300, 3));
    const auto b = conn.sealFrameForTesting(4, pattern(400, 4));
    conn.sendUnframedForTesting(b);
    conn.sendUnframedForTesting(a);
    expectDroppedByServer(conn);
  }
}

// A 1 MiB frame as a weight update would be: one bit of its payload, of its header's kind or of
// its tag changed on the way, or a tag made up without the key. Each on its own connection.
TEST_P(UcxAuth, AlteredFramesAreRefusedBeforeDelivery) {
  constexpr std::size_t kBytes = 1u << 20;
  const char* const variants[] = {"payload bit", "kind bit", "tag bit", "forged tag"};
  if (rank == kServer) {
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions());
    sharePort(listener.port());
    for (const char* variant : variants) {
      SCOPED_TRACE(variant);
      LogCapture log;
      UcxConnection conn = listener.accept(kTimeout);
      EXPECT_EQ(conn.recv(kTimeout).kind, 1u);  // the link itself works
      expectNextFrameRefused(conn, log);
    }
  } else {
    const std::uint16_t port = sharePort(0);
    for (const std::string variant : variants) {
      UcxConnection conn = connectTo(*worker, "127.0.0.1", port, linkOptions(), kTimeout);
      conn.send(1, pattern(10, 1));
      const auto payload = pattern(kBytes, 9);
      std::vector<std::byte> frame;
      if (variant == "forged tag") {
        frame = rawHeader(9, kBytes);
        frame.insert(frame.end(), payload.begin(), payload.end());
        const auto tag = pattern(32, 77);
        frame.insert(frame.end(), tag.begin(), tag.end());
      } else {
        frame = conn.sealFrameForTesting(9, payload);
        const std::size_t at = variant == "payload bit" ? 12 + kBytes / 2
                               : variant == "kind bit"  ? 0
                                                        : frame.size() - 1;
        frame[at] ^= std::byte{0x10};
      }
      conn.sendUnframedForTesting(frame);
      expectDroppedByServer(conn);
    }
  }
}

// The server's own frame sent back to it: the same sequence number, the other direction.
TEST_P(UcxAuth, FrameReflectedToItsSenderIsRefused) {
  if (rank == kServer) {
    LogCapture log;
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions());
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);
    const std::vector<std::byte> frame = conn.sealFrameForTesting(8, pattern(500, 8));
    MPI_Send(frame.data(), static_cast<int>(frame.size()), MPI_BYTE, kClient, 0, comm.raw());
    expectNextFrameRefused(conn, log);
  } else {
    UcxConnection conn = connectTo(*worker, "127.0.0.1", sharePort(0), linkOptions(), kTimeout);
    std::vector<std::byte> frame(12 + 500 + 32);
    MPI_Recv(frame.data(), static_cast<int>(frame.size()), MPI_BYTE, kServer, 0, comm.raw(), MPI_STATUS_IGNORE);
    conn.sendUnframedForTesting(frame);
    expectDroppedByServer(conn);
  }
}

// A frame of one connection copied onto another at the same sequence number: the session keys
// differ (fresh nonces). On its own connection the same bytes are good.
TEST_P(UcxAuth, FrameCopiedFromAnotherConnectionIsRefused) {
  if (rank == kServer) {
    LogCapture log;
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions());
    sharePort(listener.port());
    UcxConnection first = listener.accept(kTimeout);
    UcxConnection second = listener.accept(kTimeout);
    expectNextFrameRefused(second, log);
    const UcxMessage m = first.recv(kTimeout);
    EXPECT_EQ(m.kind, 5u);
    EXPECT_TRUE(m.payload == pattern(700, 5));
    EXPECT_EQ(first.recv(kTimeout).kind, 6u);
    first.send(7, {});
    EXPECT_EQ(first.authFailures(), 0u);
  } else {
    const std::uint16_t port = sharePort(0);
    UcxConnection first = connectTo(*worker, "127.0.0.1", port, linkOptions(), kTimeout);
    const auto frame = first.sealFrameForTesting(5, pattern(700, 5));
    UcxConnection second = connectTo(*worker, "127.0.0.1", port, linkOptions(), kTimeout);
    second.sendUnframedForTesting(frame);
    expectDroppedByServer(second);
    first.sendUnframedForTesting(frame);
    first.send(6, {});
    EXPECT_EQ(first.recv(kTimeout).kind, 7u);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxAuth, transports(), transportName);
