// OpenEnv episodes per second against one local server (docs/performance.md, "OpenEnv"): the
// `openenv` environment (src/tasks/env_openenv.cpp) playing examples/openenv_guess's game with a
// scripted binary search, with 1, 16 and 64 sessions open at once (one turn of each in turn, as a
// rollout rank interleaves its episodes), N episodes each.
//   bench_openenv PYTHON SERVER_SCRIPT [N]
// Prints one JSON line per session count: episodes/s, steps/s, mean step latency, ratio to one
// session.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "astraflow/tasks/environment.hpp"
#include "astraflow/tasks/openenv.hpp"
#include "bench_openenv_game.hpp"
#include "bench_timing.hpp"

using namespace astraflow;

namespace {

struct Game {
  std::unique_ptr<Environment> env;
  int low = 1, high = 16;
  bool open = false;
};

// Plays `episodes` games with `sessions` of them open at once; returns the steps taken.
std::uint64_t play(const EnvironmentOptions& options, int sessions, int episodes) {
  std::vector<Game> games(static_cast<std::size_t>(sessions));
  for (auto& g : games) g.env = makeEnvironment(options);
  int started = 0, finished = 0;
  std::uint64_t steps = 0;
  while (finished < episodes) {
    for (auto& g : games) {
      if (!g.open) {
        if (started == episodes) continue;
        g.env->reset(static_cast<std::uint64_t>(started++));
        g.low = 1, g.high = 16, g.open = true;
      }
      const int guess = (g.low + g.high) / 2;
      const StepResult s = g.env->step(std::to_string(guess));
      ++steps;
      if (s.done) {
        g.open = false;
        ++finished;
      } else if (s.observation.find("Higher.") != std::string::npos) {
        g.low = guess + 1;
      } else {
        g.high = guess - 1;
      }
    }
  }
  return steps;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_openenv PYTHON SERVER_SCRIPT [N]\n");
    return 2;
  }
  const int episodes = argc > 3 ? std::stoi(argv[3]) : 256;
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("bench_openenv_{}", ::getpid());
  const EnvironmentOptions options = bench::openenvGuessGame(dir, argv[1], argv[2]);
  play(options, 1, 4);  // the server started and warm
  double one = 0;
  for (const int sessions : {1, 16, 64}) {
    std::uint64_t steps = 0;
    const double t = bench::seconds();
    steps = play(options, sessions, episodes);
    const double wall = bench::seconds() - t;
    const double rate = episodes / wall;
    if (sessions == 1) one = rate;
    std::printf(
        "{\"sessions\": %d, \"episodes\": %d, \"steps\": %llu, \"seconds\": %.3f, \"episodes_per_s\": %.1f, "
        "\"steps_per_s\": %.1f, \"ms_per_step\": %.3f, \"vs_one_session\": %.2f}\n",
        sessions, episodes, static_cast<unsigned long long>(steps), wall, rate, steps / wall, 1e3 * wall / steps,
        rate / one);
  }
  const OpenEnvCounters c = sharedOpenEnvCounters();
  std::printf("{\"sessions_opened\": %llu, \"errors\": %llu}\n", static_cast<unsigned long long>(c.sessions),
              static_cast<unsigned long long>(c.errors));
  std::filesystem::remove_all(dir);
  return c.errors == 0 ? 0 : 1;
}
