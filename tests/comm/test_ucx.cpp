// The UCX message transport at 2 ranks: rank 0 listens on 127.0.0.1, rank 1 connects. MPI
// only carries the listener's port and keeps the ranks in step; every message goes over UCX.
// Each test runs twice: with UCX choosing its transports and with UCX_TLS=tcp (as between
// sites). Covered: payloads of 0 bytes, 1 byte and 10 MiB both ways, byte for byte; order of
// many messages; handshake refusals (token, protocol version) with the reason on both sides
// and the server going on to accept a good client; an incoming length over the limit; a peer
// that hangs up mid-frame or between messages.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/comm.hpp"
#include "astraflow/comm/ucx.hpp"

using namespace astraflow;

namespace {

constexpr int kServer = 0;
constexpr int kClient = 1;
constexpr double kTimeout = 60.0;  // generous: oversubscribed ranks on a 2-core machine
const std::string kToken = "s3cret-link-token-7f1c";

struct Transport {
  const char* label;
  UcxSettings settings;
};

void PrintTo(const Transport& t, std::ostream* os) { *os << t.label; }

std::string transportName(const ::testing::TestParamInfo<Transport>& info) { return info.param.label; }

UcxLinkOptions linkOptions(std::string token = kToken, std::uint32_t version = 1) {
  UcxLinkOptions o;
  o.token = std::move(token);
  o.protocol_version = version;
  return o;
}

std::vector<std::byte> pattern(std::size_t size, std::uint32_t seed) {
  std::vector<std::byte> v(size);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<std::byte>(x & 0xff);
  }
  return v;
}

// A raw frame header (kind u32, length u64, little-endian), for the framing tests.
std::vector<std::byte> rawHeader(std::uint32_t kind, std::uint64_t length) {
  std::vector<std::byte> h;
  for (int i = 0; i < 4; ++i) h.push_back(static_cast<std::byte>((kind >> (8 * i)) & 0xff));
  for (int i = 0; i < 8; ++i) h.push_back(static_cast<std::byte>((length >> (8 * i)) & 0xff));
  return h;
}

// Collects what the default logger writes while it lives.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  std::string text() const { return text_.str(); }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

class UcxLink : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    ASSERT_EQ(comm.size(), 2) << "registered at 2 ranks";
    context = std::make_unique<UcpContext>(GetParam().settings);
    worker = std::make_unique<UcpWorker>(*context);
  }
  void TearDown() override {
    worker.reset();
    context.reset();
    comm.barrier();
  }

  // Server: listens and tells the client the port. Client: returns the port.
  std::uint16_t sharePort(std::uint16_t port) {
    int p = port;
    MPI_Bcast(&p, 1, MPI_INT, kServer, comm.raw());
    return static_cast<std::uint16_t>(p);
  }

  Comm comm = Comm::duplicate(MPI_COMM_WORLD);
  int rank = comm.rank();
  std::unique_ptr<UcpContext> context;
  std::unique_ptr<UcpWorker> worker;
};

}  // namespace

TEST_P(UcxLink, EmptyOneByteAndTenMiBRoundTripByteForByte) {
  const std::size_t sizes[] = {0, 1, 10u << 20};
  if (rank == kServer) {
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions());
    EXPECT_NE(listener.port(), 0);
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);
    EXPECT_TRUE(conn.isOpen());
    for (std::uint32_t i = 0; i < 3; ++i) {
      const UcxMessage m = conn.recv(kTimeout);
      EXPECT_EQ(m.kind, 10 + i);
      ASSERT_EQ(m.payload.size(), sizes[i]);
      EXPECT_TRUE(m.payload == pattern(sizes[i], i)) << "client->server payload " << i << " differs";
    }
    for (std::uint32_t i = 0; i < 3; ++i) conn.send(20 + i, pattern(sizes[i], 100 + i));
    // Wait for the client to confirm before the connection goes away.
    const UcxMessage done = conn.recv(kTimeout);
    EXPECT_EQ(done.kind, 99u);
  } else {
    const std::uint16_t port = sharePort(0);
    UcxConnection conn = connectTo(*worker, "127.0.0.1", port, linkOptions(), kTimeout);
    EXPECT_EQ(conn.peerMaxMessageBytes(), linkOptions().max_message_bytes);
    for (std::uint32_t i = 0; i < 3; ++i) conn.send(10 + i, pattern(sizes[i], i));
    for (std::uint32_t i = 0; i < 3; ++i) {
      const UcxMessage m = conn.recv(kTimeout);
      EXPECT_EQ(m.kind, 20 + i);
      ASSERT_EQ(m.payload.size(), sizes[i]);
      EXPECT_TRUE(m.payload == pattern(sizes[i], 100 + i)) << "server->client payload " << i << " differs";
    }
    conn.send(99, {});
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
      posted += 12 + sizeOf(i);
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

TEST_P(UcxLink, WrongTokenIsRefusedWithReasonAndServerAcceptsTheNextClient) {
  // Same length as kToken, one byte off: the comparison has to look at every byte.
  const std::string wrong = "s3cret-link-token-7f1d";
  ASSERT_EQ(wrong.size(), kToken.size());
  if (rank == kServer) {
    LogCapture log;
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions());
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);  // the refused client does not end it
    EXPECT_EQ(listener.refusedCount(), 1u);
    EXPECT_EQ(listener.lastRefusal(), "token mismatch");
    const std::string logged = log.text();
    EXPECT_NE(logged.find("token mismatch"), std::string::npos) << logged;
    EXPECT_EQ(logged.find(kToken), std::string::npos) << "token leaked to the log";
    EXPECT_EQ(logged.find(wrong), std::string::npos) << "client's token leaked to the log";
    const UcxMessage m = conn.recv(kTimeout);
    EXPECT_EQ(m.kind, 5u);
    conn.send(6, {});
  } else {
    const std::uint16_t port = sharePort(0);
    try {
      connectTo(*worker, "127.0.0.1", port, linkOptions(wrong), kTimeout);
      ADD_FAILURE() << "a client with the wrong token was accepted";
    } catch (const UcxHandshakeRefused& e) {
      EXPECT_EQ(e.reason(), "token mismatch");
      EXPECT_NE(std::string(e.what()).find("token mismatch"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find(wrong), std::string::npos) << e.what();
    }
    UcxConnection conn = connectTo(*worker, "127.0.0.1", port, linkOptions(), kTimeout);
    conn.send(5, {});
    EXPECT_EQ(conn.recv(kTimeout).kind, 6u);
  }
}

TEST_P(UcxLink, WrongProtocolVersionIsRefusedWithBothVersions) {
  if (rank == kServer) {
    LogCapture log;
    UcxListener listener(*worker, "127.0.0.1", 0, linkOptions(kToken, 1));
    sharePort(listener.port());
    UcxConnection conn = listener.accept(kTimeout);
    EXPECT_EQ(listener.refusedCount(), 1u);
    EXPECT_EQ(listener.lastRefusal(), "protocol version 2, this side speaks 1");
    EXPECT_NE(log.text().find("protocol version 2, this side speaks 1"), std::string::npos) << log.text();
    EXPECT_EQ(log.text().find(kToken), std::string::npos) << "token leaked to the log";
    EXPECT_EQ(conn.recv(kTimeout).kind, 7u);
  } else {
    const std::uint16_t port = sharePort(0);
    EXPECT_THROW(
        {
          try {
            connectTo(*worker, "127.0.0.1", port, linkOptions(kToken, 2), kTimeout);
          } catch (const UcxHandshakeRefused& e) {
            EXPECT_EQ(e.reason(), "protocol version 2, this side speaks 1");
            throw;
          }
        },
        UcxHandshakeRefused);
    UcxConnection conn = connectTo(*worker, "127.0.0.1", port, linkOptions(kToken, 1), kTimeout);
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

INSTANTIATE_TEST_SUITE_P(Transports, UcxLink,
                         ::testing::Values(Transport{"UcxDefault", {}}, Transport{"TcpOnly", {{"TLS", "tcp"}}}),
                         transportName);
