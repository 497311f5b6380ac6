// Environment threads beside the continuous engine (docs/performance.md, "Environment work off
// the rank's thread"): a rollout rank's EpisodeStream playing examples/openenv_guess's game (a
// real server: every reset and answer a WebSocket round trip) with a random model on the CPU
// engine, the environment's work on the caller's thread (0) against 2, 4 and 8 environment
// threads, in one process, the same episodes each time (greedy). Prints one JSON line per thread
// count: wall seconds, episodes/s, the engine's steps and the share of them taken while answers
// were awaited, and the ratio of episodes/s to the caller's thread.
//   bench_env_threads PYTHON SERVER_SCRIPT [EPISODES] [RUNNING]
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "astraflow/rollout/episode_stream.hpp"
#include "astraflow/rollout/generation.hpp"
#include "bench_openenv_game.hpp"

using namespace astraflow;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_env_threads PYTHON SERVER_SCRIPT [EPISODES] [RUNNING]\n");
    return 2;
  }
  const int episodes = argc > 3 ? std::stoi(argv[3]) : 128;
  const int running = argc > 4 ? std::stoi(argv[4]) : 32;  // episodes held at once (rollout.batch_tasks)
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("bench_env_threads_{}", ::getpid());
  const EnvironmentOptions options = bench::openenvGuessGame(dir, argv[1], argv[2]);
  const auto tok = makeEnvironmentTokenizer(options);
  torch::manual_seed(1);
  ModelConfig m;
  m.vocab_size = tok->vocabSize();
  m.d_model = 256;
  m.layers = 4;
  m.heads = 4;
  m.kv_heads = 2;
  m.ffn_hidden = 768;
  m.max_seq_len = 512;
  PolicyModel model(m);
  model->setNeverGenerate({tokenSpecOf(*tok).pad_id});
  SamplingOptions sampling;
  sampling.greedy = true;
  sampling.max_new_tokens = 8;
  double base = 0;
  for (const int threads : {-1, 0, 2, 4, 8}) {  // -1: a warm-up (the server started), not printed
    GenerationEngine engine(model, tokenSpecOf(*tok).pad_id, {running, 0, 16});
    EpisodeStream stream(engine.scheduler(), *tok, options, m.max_seq_len, std::max(threads, 0));
    const int n = threads < 0 ? 4 : episodes;
    int started = 0, ended = 0;
    const auto t0 = std::chrono::steady_clock::now();
    while (ended < n) {
      while (started < n && static_cast<int>(stream.active()) < running) {
        stream.start(static_cast<std::uint64_t>(started), sampling, 7 + started, started);
        ++started;
      }
      ended += static_cast<int>(stream.step().size());
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (threads < 0) continue;
    const auto& c = stream.counters();
    const double rate = n / seconds;
    if (threads == 0) base = rate;
    std::printf(
        "{\"environment_threads\": %d, \"episodes\": %d, \"running\": %d, \"seconds\": %.3f, \"episodes_per_s\": "
        "%.2f, \"engine_steps\": %llu, \"engine_steps_beside_env\": %.3f, \"vs_callers_thread\": %.2f}\n",
        threads, n, running, seconds, rate, static_cast<unsigned long long>(c.source_steps),
        c.source_steps > 0 ? static_cast<double>(c.source_steps_beside_env) / static_cast<double>(c.source_steps) : 0.0,
        base > 0 ? rate / base : 0.0);
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
