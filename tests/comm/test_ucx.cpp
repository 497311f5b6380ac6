// The UCX message transport at 2 ranks (tests/comm/ucx_test_support.hpp: rank 0 listens on
// 127.0.0.1, rank 1 connects; each test with UCX's own transports and with UCX_TLS=tcp).
// Covered: payloads of 0 bytes, 1 byte, 4 KiB and 64 MiB both ways through send() and post(),
// byte for byte; order of many messages; the outbox; handshake refusals (protocol version)
// with the reason on both sides and the server going on to accept a good client; an incoming
// length over the limit; a peer that hangs up mid-frame or between messages. The link's
// authentication (keys, tags, replay, tampering): test_ucx_auth.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "astraflow/comm/backoff.hpp"
#include "comm/ucx_test_support.hpp"

using namespace astraflow;
using namespace astraflow::ucx_test;

namespace {

class UcxLink : public UcxLinkTest {};

}  // namespace

// Every frame is tagged and checked (test_ucx_auth.cpp); the empty, small and large payloads
// still arrive byte for byte, both ways, whether sent blocking or posted.
TEST_P(UcxLink, MessagesOf0Bytes1Byte4KiBAnd64MiBCrossBothWaysThroughSendAndPost) {
  const std::size_t sizes[] = {0, 1, 4096, 64u << 20};
  constexpr std::uint32_t kSizes = 4;
  auto sendAll = [&](UcxConnection& conn, std::uint32_t kind_base, std::uint32_t seed_base) {
    for (std::uint32_t i = 0; i < kSizes; ++i) conn.send(kind_base + i, pattern(sizes[i], seed_base + i));
    for (std::uint32_t i = 0; i < kSizes; ++i) conn.post(kind_base + 10 + i, pattern(sizes[i], seed_base + 10 + i));
  };
  auto receiveAll = [&](UcxConnection& conn, std::uint32_t kind_base, std::uint32_t seed_base, const char* way) {
    for (std::uint32_t j = 0; j < 2 * kSizes; ++j) {
      const std::uint32_t i = j % kSizes, offset = j < kSizes ? 0 : 10;
      const UcxMessage m = conn.recv(kTimeout);
      EXPECT_EQ(m.kind, kind_base + offset + i) << way;
      ASSERT_EQ(m.payload.size(), sizes[i]) << way;
      EXPECT_TRUE(m.payload == pattern(sizes[i], seed_base + offset + i))
          << way << " payload " << i << (offset ? " (posted)" : " (sent)") << " differs";
    }
  };
  auto drain = [](UcxConnection& conn) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(kTimeout);
    while (conn.queuedFrames() > 0 && std::chrono::steady_clock::now() < give_up) conn.progressSends();
    EXPECT_EQ(conn.queuedFrames(), 0u);
  };
  if (rank == kServer) {
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions());
    EXPECT_NE(listener.port(), 0);
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);
    EXPECT_TRUE(conn.isOpen());
    receiveAll(conn, 10, 0, "client->server");
    sendAll(conn, 40, 100);
    // Wait for the client to confirm before the connection goes away.
    EXPECT_EQ(conn.recv(kTimeout).kind, 99u);
    drain(conn);
    EXPECT_EQ(conn.authFailures(), 0u);
  } else {
    const std::uint16_t port = sharePort(0);
    UcxConnection conn = connectTo(*worker, "127.0.0.1", port, linkOptions(), kTimeout);
    EXPECT_EQ(conn.peerMaxMessageBytes(), linkOptions().max_message_bytes);
    sendAll(conn, 10, 0);
    receiveAll(conn, 40, 100, "server->client");
    conn.send(99, {});
    drain(conn);
    EXPECT_EQ(conn.authFailures(), 0u);
  }
}

TEST_P(UcxLink, ManyMessagesArriveInOrderThroughTryRecv) {
  constexpr std::uint32_t kCount = 300;
  auto sizeOf = [](std::uint32_t i) { return static_cast<std::size_t>((i * 37) % 5000); };
  if (rank == kServer) {
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions());
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);
    std::uint32_t next = 0;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(kTimeout);
    Backoff backoff;
    while (next < kCount && std::chrono::steady_clock::now() < give_up) {
      std::optional<UcxMessage> m = conn.tryRecv();
      if (!m) {
        backoff.wait();
        continue;
      }
      backoff.reset();
      ASSERT_EQ(m->kind, next) << "out of order";
      ASSERT_TRUE(m->payload == pattern(sizeOf(next), next)) << "message " << next << " differs";
      ++next;
    }
    EXPECT_EQ(next, kCount);
    conn.send(1, {});
  } else {
    UcxConnection conn = connectTo(*worker, "127.0.0.1", sharePort(0), linkOptions(), kTimeout);
    for (std::uint32_t i = 0; i < kCount; ++i) conn.send(i, pattern(sizeOf(i), i));
    EXPECT_EQ(conn.recv(kTimeout).kind, 1u);
  }
}

// post() hands frames over without waiting; they arrive whole and in order, interleaved with a
// blocking send(), and the outbox empties once the peer has read them. While the peer reads
// nothing, post() still returns at once and the outbox keeps what the link has not taken.
TEST_P(UcxLink, PostedFramesArriveInOrderAndTheOutboxDrains) {
  constexpr std::uint32_t kCount = 40;
  auto sizeOf = [](std::uint32_t i) { return i == 7 ? std::size_t{8} << 20 : static_cast<std::size_t>(i * 1013); };
  if (rank == kServer) {
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions());
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);
    comm.barrier();  // reads nothing until the client has posted everything and looked at its outbox
    for (std::uint32_t i = 0; i < kCount; ++i) {
      const UcxMessage m = conn.recv(kTimeout);
      ASSERT_EQ(m.kind, 100 + i) << "out of order";
      ASSERT_TRUE(m.payload == pattern(sizeOf(i), i)) << "posted frame " << i << " differs";
    }
    EXPECT_EQ(conn.recv(kTimeout).kind, 6u);  // the blocking send after them comes after them
    conn.send(1, {});
  } else {
    UcxConnection conn = connectTo(*worker, "127.0.0.1", sharePort(0), linkOptions(), kTimeout);
    std::uint64_t posted = 0;
    for (std::uint32_t i = 0; i < kCount; ++i) {
      conn.post(100 + i, pattern(sizeOf(i), i));
      posted += 12 + sizeOf(i) + 32;  // header, payload, tag
    }
    // Every post returned although the peer reads nothing yet: 8 MiB cannot all have left.
    EXPECT_GT(conn.queuedFrames(), 0u);
    EXPECT_GT(conn.queuedBytes(), 0u);
    EXPECT_LE(conn.queuedBytes(), posted);
    comm.barrier();
    conn.send(6, {});
    EXPECT_EQ(conn.recv(kTimeout).kind, 1u);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(kTimeout);
    while (conn.queuedFrames() > 0 && std::chrono::steady_clock::now() < give_up) conn.progressSends();
    EXPECT_EQ(conn.queuedFrames(), 0u);
    EXPECT_EQ(conn.queuedBytes(), 0u);
    EXPECT_EQ(conn.oldestQueuedSeconds(), 0.0);
  }
}

// A version-1 peer's hello has the same layout up to the version (its token string sits where
// the nonce is now), so the server reads the version first and refuses by it.
TEST_P(UcxLink, WrongProtocolVersionIsRefusedWithBothVersions) {
  if (rank == kServer) {
    LogCapture log;
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions(kToken, 2));
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);
    EXPECT_EQ(listener.refusedCount(), 1u);
    EXPECT_EQ(listener.authFailures(), 0u) << "a version mismatch is not an authentication failure";
    EXPECT_EQ(listener.lastRefusal(), "protocol version 1, this side speaks 2");
    EXPECT_NE(log.text().find("protocol version 1, this side speaks 2"), std::string::npos) << log.text();
    EXPECT_EQ(log.text().find(kToken), std::string::npos) << "token leaked to the log";
    EXPECT_EQ(conn.recv(kTimeout).kind, 7u);
  } else {
    const std::uint16_t port = sharePort(0);
    EXPECT_THROW(
        {
          try {
            connectTo(*worker, "127.0.0.1", port, linkOptions(kToken, 1), kTimeout);
          } catch (const UcxHandshakeRefused& e) {
            EXPECT_EQ(e.reason(), "protocol version 1, this side speaks 2");
            EXPECT_TRUE(e.byServer());
            throw;
          }
        },
        UcxHandshakeRefused);
    UcxConnection conn = connectTo(*worker, "127.0.0.1", port, linkOptions(kToken, 2), kTimeout);
    conn.send(7, {});
    // Hold the connection until the server has read the message.
    EXPECT_THROW(conn.recv(kTimeout), UcxConnectionClosed);
  }
}

TEST_P(UcxLink, IncomingLengthOverTheLimitClosesTheConnectionUnallocated) {
  constexpr std::uint64_t kLimit = 1024;
  if (rank == kServer) {
    UcxLinkOptions small = linkOptions();
    small.max_message_bytes = kLimit;
    LogCapture log;
    UcxListener listener(*worker, "127.0.0.1", 0, small);
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);
    const UcxMessage at_limit = conn.recv(kTimeout);
    EXPECT_EQ(at_limit.kind, 1u);
    EXPECT_TRUE(at_limit.payload == pattern(kLimit, 1));
    // 1 TiB announced: allocating it would throw bad_alloc (or worse), not this.
    EXPECT_THROW(conn.recv(kTimeout), UcxMalformedMessage);
    EXPECT_FALSE(conn.isOpen());
    EXPECT_NE(conn.closeReason().find("1099511627776 bytes"), std::string::npos) << conn.closeReason();
    EXPECT_NE(log.text().find("malformed frame"), std::string::npos) << log.text();
    EXPECT_THROW(conn.tryRecv(), UcxConnectionClosed);
    EXPECT_THROW(conn.send(1, {}), UcxConnectionClosed);
  } else {
    UcxConnection conn = connectTo(*worker, "127.0.0.1", sharePort(0), linkOptions(), kTimeout);
    EXPECT_EQ(conn.peerMaxMessageBytes(), kLimit);
    // Over the server's limit: refused here, before anything is sent; the link stays up.
    EXPECT_THROW(conn.send(1, pattern(kLimit + 1, 1)), UcxError);
    EXPECT_TRUE(conn.isOpen());
    conn.send(1, pattern(kLimit, 1));
    conn.sendUnframedForTesting(rawHeader(2, std::uint64_t{1} << 40));
    // The server drops the connection; this side sees it closed, not a timeout.
    EXPECT_THROW(conn.recv(kTimeout), UcxConnectionClosed);
    EXPECT_FALSE(conn.isOpen());
  }
}

TEST_P(UcxLink, PeerHangingUpMidFrameYieldsClosedAndNoMessage) {
  if (rank == kServer) {
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions());
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(kTimeout);
    Backoff backoff;
    bool closed = false;
    int messages = 0;
    while (!closed && std::chrono::steady_clock::now() < give_up) {
      try {
        if (conn.tryRecv()) ++messages;
        backoff.wait();
      } catch (const UcxConnectionClosed& e) {
        closed = true;
        EXPECT_NE(std::string(e.what()).find("peer closed"), std::string::npos) << e.what();
      }
    }
    EXPECT_TRUE(closed) << "the client's hang-up was not noticed";
    EXPECT_EQ(messages, 0) << "a truncated message was returned";
    EXPECT_FALSE(conn.isOpen());
    EXPECT_THROW(conn.send(1, {}), UcxConnectionClosed);
  } else {
    UcxConnection conn = connectTo(*worker, "127.0.0.1", sharePort(0), linkOptions(), kTimeout);
    // Header for 4096 bytes, then only 1000 of them.
    conn.sendUnframedForTesting(rawHeader(3, 4096));
    conn.sendUnframedForTesting(pattern(1000, 3));
    conn.close(kTimeout);
    EXPECT_FALSE(conn.isOpen());
    EXPECT_THROW(conn.send(1, {}), UcxConnectionClosed);
  }
}

TEST_P(UcxLink, PeerHangingUpBetweenMessagesEndsRecvWithClosedNotTimeout) {
  if (rank == kServer) {
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions());
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);
    EXPECT_EQ(conn.recv(kTimeout).kind, 4u);
    conn.send(5, {});
    EXPECT_THROW(conn.recv(kTimeout), UcxConnectionClosed);
    EXPECT_NE(conn.closeReason().find("peer closed"), std::string::npos) << conn.closeReason();
  } else {
    UcxConnection conn = connectTo(*worker, "127.0.0.1", sharePort(0), linkOptions(), kTimeout);
    conn.send(4, {});
    EXPECT_EQ(conn.recv(kTimeout).kind, 5u);
    // The destructor closes the connection.
  }
}

TEST_P(UcxLink, ConnectingWhereNobodyListensFailsWithoutWaitingForTheTimeout) {
  std::uint16_t port = 0;
  {
    UcxListener gone(*worker, "127.0.0.1", 0, linkOptions());
    port = gone.port();
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    connectTo(*worker, "127.0.0.1", port, linkOptions(), kTimeout);
    ADD_FAILURE() << "connected to a closed port";
  } catch (const UcxTimeout& e) {
    ADD_FAILURE() << "timed out instead of failing: " << e.what();
  } catch (const UcxError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot connect"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), kTimeout / 2);
}

TEST_P(UcxLink, AcceptWithoutClientsTimesOut) {
  UcxListener listener(*worker, "127.0.0.1", 0, linkOptions());
  EXPECT_THROW(listener.accept(0.2), UcxTimeout);
}

TEST(UcxCheck, MacroThrowsWithTheStatusText) {
  try {
    ASTRA_UCX_CHECK(-6);  // UCS_ERR_UNREACHABLE
    ADD_FAILURE() << "no throw";
  } catch (const UcxError& e) {
    EXPECT_EQ(e.status(), -6);
    EXPECT_NE(std::string(e.what()).find("Destination is unreachable"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("test_ucx.cpp"), std::string::npos) << e.what();
  }
}

TEST(UcxLinkKey, AnEmptyTokenIsRefusedOnBothSides) {
  UcpContext context;
  UcpWorker worker(context);
  EXPECT_THROW(UcxListener(worker, "127.0.0.1", 0, linkOptions("")), UcxError);
  EXPECT_THROW(connectTo(worker, "127.0.0.1", 1, linkOptions(""), 1.0), UcxError);
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxLink, transports(), transportName);
