// installDeathReport: a SIGTERM handler that names the rank that died with its role, pid and host, printed by the
// lowest-numbered survivor on its node when Open MPI's launcher ends the job after a rank is lost.
#include "apps/death_report.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "astraflow/comm/mpi.hpp"

namespace astraflow {

namespace {

struct Peer {
  pid_t pid = 0;
  std::string line;  // printed when this peer is found dead
};

// Read by the signal handler only; written once before the handler is installed.
std::vector<Peer>* g_peers_on_node = nullptr;
int g_my_index = -1;  // my position in g_peers_on_node
std::string* g_tail = nullptr;
std::vector<char>* g_dead = nullptr;  // scratch, sized at install (no allocation in the handler)

void onTerminate(int) {
  const int saved = errno;
  const auto& peers = *g_peers_on_node;
  bool any = false;
  int lowest_alive = -1;
  auto& dead = *g_dead;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const bool gone = ::kill(peers[i].pid, 0) != 0 && errno == ESRCH;
    dead[i] = gone;
    any = any || gone;
    if (!gone && lowest_alive < 0) lowest_alive = static_cast<int>(i);
  }
  if (any && lowest_alive == g_my_index) {
    for (std::size_t i = 0; i < peers.size(); ++i) {
      if (dead[i]) (void)!::write(STDERR_FILENO, peers[i].line.data(), peers[i].line.size());
    }
    (void)!::write(STDERR_FILENO, g_tail->data(), g_tail->size());
  }
  errno = saved;
  _exit(128 + SIGTERM);
}

}  // namespace

void installDeathReport(const Comm& world, const RoleMap& map) {
  char host[64] = {0};
  gethostname(host, sizeof host - 1);
  const std::vector<std::byte> host_bytes = world.allgatherBytes(std::as_bytes(std::span(host)));
  const char* hosts = reinterpret_cast<const char*>(host_bytes.data());
  const long mine = static_cast<long>(getpid());
  const std::vector<std::byte> pid_bytes = world.allgatherBytes(std::as_bytes(std::span(&mine, 1)));
  std::vector<long> pids(static_cast<std::size_t>(world.size()));
  std::memcpy(pids.data(), pid_bytes.data(), pid_bytes.size());

  auto* peers = new std::vector<Peer>();  // lives until exit: the handler may run any time
  for (int r = 0; r < world.size(); ++r) {
    if (std::strncmp(&hosts[64 * r], host, 64) != 0) continue;
    if (r == world.rank()) g_my_index = static_cast<int>(peers->size());
    peers->push_back(
        {static_cast<pid_t>(pids[r]), fmt::format("astraflow: rank {} ({}, pid {} on {}) died; the job stops\n", r,
                                                  map.of(r).label(), pids[r], &hosts[64 * r])});
  }
  g_peers_on_node = peers;
  g_dead = new std::vector<char>(peers->size(), 0);
  // What survives a loss today (docs/elastic.md): only rollout ranks that elastic pools spawned,
  // under `mpirun --enable-recovery`. A rank the layout started takes the job down with it.
  g_tail = new std::string(
      "astraflow: the job cannot go on without a rank its layout started (trainer, dataflow, gateway or "
      "rollout). Survivable today: rollout ranks that elastic pools spawned (elastic.mode auto|external, "
      "mpirun --enable-recovery), whose tasks go to the other pools. Continue this run with "
      "`astraflow run --resume <run>` from its newest checkpoint (run.checkpoint_every sets how often)\n");
  struct sigaction action {};
  action.sa_handler = onTerminate;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
}

}  // namespace astraflow
