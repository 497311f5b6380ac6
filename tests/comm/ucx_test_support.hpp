#pragma once
// What the UCX transport tests share (tests/comm/test_ucx.cpp, test_ucx_auth.cpp): rank 0 is
// the server and listens on 127.0.0.1, rank 1 the client; MPI only carries the listener's port
// and keeps the ranks in step. Every fixture test runs twice: with UCX choosing its transports
// and with UCX_TLS=tcp (as between sites).
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "astraflow/comm/comm.hpp"
#include "astraflow/comm/ucx.hpp"

namespace astraflow::ucx_test {

inline constexpr int kServer = 0;
inline constexpr int kClient = 1;
inline constexpr double kTimeout = 60.0;  // generous: oversubscribed ranks on a 2-core machine
inline const std::string kToken = "s3cret-link-token-7f1c";

struct Transport {
  const char* label;
  UcxSettings settings;
};

inline void PrintTo(const Transport& t, std::ostream* os) { *os << t.label; }

inline std::string transportName(const ::testing::TestParamInfo<Transport>& info) { return info.param.label; }

inline auto transports() {
  return ::testing::Values(Transport{"UcxDefault", {}}, Transport{"TcpOnly", {{"TLS", "tcp"}}});
}

inline UcxLinkOptions linkOptions(std::string token = kToken, std::uint32_t version = 2) {
  UcxLinkOptions o;
  o.token = std::move(token);
  o.protocol_version = version;
  return o;
}

inline std::vector<std::byte> pattern(std::size_t size, std::uint32_t seed) {
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
inline std::vector<std::byte> rawHeader(std::uint32_t kind, std::uint64_t length) {
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

class UcxLinkTest : public ::testing::TestWithParam<Transport> {
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

}  // namespace astraflow::ucx_test
