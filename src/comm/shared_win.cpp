// Node-shared memory (POSIX shm, see the header) and the node groups it is made on (pretend
// nodes for tests).
#include "astraflow/comm/shared_win.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "astraflow/comm/comm.hpp"
#include "astraflow/comm/mpi.hpp"
#include "astraflow/comm/win.hpp"

namespace astraflow {

namespace {

// A name no other segment has: this process, and a count of the segments it made.
std::string segmentName() {
  static std::atomic<std::uint64_t> made{0};
  return fmt::format("/astraflow-{}-{}", ::getpid(), made++);
}

std::byte* mapSegment(int fd, std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
}

}  // namespace

SharedWin SharedWin::allocate(const Comm& node, std::size_t bytes, const char* what) {
  const bool leader = node.rank() == 0;
  std::string name, error;
  int fd = -1;
  if (leader) {
    name = segmentName();
    fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      error = fmt::format("shm_open {}: {}", name, std::strerror(errno));
    } else if (const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); rc != 0) {
      error = fmt::format("reserving {} in /dev/shm: {}", humanBytes(bytes), std::strerror(rc));
    }
  }
  // The leader's outcome first: the others open the segment only when it exists.
  error = node.broadcastString(0, error);
  name = node.broadcastString(0, name);
  if (error.empty() && !leader) {
    fd = ::shm_open(name.c_str(), O_RDWR, 0600);
    if (fd < 0) error = fmt::format("shm_open {}: {}", name, std::strerror(errno));
  }
  SharedWin w;
  if (error.empty()) {
    w.base_ = mapSegment(fd, bytes);
    if (w.base_)
      w.bytes_ = bytes;
    else
      error = fmt::format("mmap of {}: {}", humanBytes(bytes), std::strerror(errno));
  }
  if (fd >= 0) ::close(fd);  // the mapping keeps the segment
  const std::uint64_t failed = node.allreduceMax(std::uint64_t{error.empty() ? 0u : 1u});
  node.barrier();  // every rank has mapped it (or given up): the name can go
  if (leader && !name.empty()) ::shm_unlink(name.c_str());
  if (failed) {
    throw WindowAllocationError(fmt::format("{}: node-shared memory '{}' ({}) could not be set up on this node{}",
                                            processLocation(), what, humanBytes(bytes),
                                            error.empty() ? " (a peer failed)" : ": " + error));
  }
  return w;
}

SharedWin::~SharedWin() {
  if (base_) ::munmap(base_, bytes_);
}

SharedWin& SharedWin::operator=(SharedWin&& o) noexcept {
  if (this != &o) {
    SharedWin dying(std::move(*this));
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

int pretendNodeRanks() {
  const char* text = std::getenv("ASTRAFLOW_NODE_RANKS");
  if (!text || !*text) return 0;
  char* end = nullptr;
  const long k = std::strtol(text, &end, 10);
  if (*end != '\0' || k < 1 || k > 1'000'000)
    throw Error(fmt::format("ASTRAFLOW_NODE_RANKS='{}': expected a positive number of ranks per pretend node", text));
  return static_cast<int>(k);
}

Comm splitIntoNodes(const Comm& comm) {
  Comm node = comm.splitByNode();
  const int k = pretendNodeRanks();
  if (k == 0) return node;
  return node.split(node.rank() / k, node.rank());
}

}  // namespace astraflow
