// mpirun -np N bench_trainer_memory [options]: one data-parallel trainer group of N ranks
// training a Qwen3-0.6B-shaped policy (random init; vocab 151936, hidden 1024, 28 layers, 16
// heads of 128, 8 KV heads, MLP 3072, tied embeddings) for a few RL steps, unsharded, with
// ZeRO-1 (trainer.sharding: optimizer) or with parameter sharding (parameters). Prints one JSON
// line per rank: its peak resident set, its resident set after set-up and after the steps, its
// AdamW state bytes, the weights and gradients it holds between steps, and its step times. With
// --limit-gib G each rank's data segment is capped at G GiB (RLIMIT_DATA: malloc past it fails),
// so a layout that does not fit fails with an allocation error instead of swapping or waking the
// OOM killer.
//   --sharding none|optimizer|parameters  --grad-sync c10d|mpi (default c10d)
//   --layers L  --steps S  --batch B  --seq T
//   --limit-gib G
//   --hidden H --heads A --kv-heads K --head-dim D --ffn F --vocab V  --checkpointing 0|1
//   --logits-chunk-bytes B  (trainer.logits_chunk_bytes; 0: whole-vocabulary log-probs)
//   --checkpoint DIR  after the steps, write the trainer checkpoint into DIR (the group's first rank
//                     writes, sharded or not) and report each rank's private memory (RssAnon)
//                     before, at its peak during, and after the write
#include <mpi.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <torch/utils.h>

#include "astraflow/comm/comm.hpp"
#include "astraflow/model/device.hpp"
#include "astraflow/run/private_memory_peak.hpp"
#include "astraflow/trainer/policy_trainer.hpp"
#include "astraflow/trainer/trainer_checkpoint.hpp"

using namespace astraflow;

namespace {

struct Options {
  std::string sharding = "none";
  std::string grad_sync = "c10d";
  std::string checkpoint;  // a folder: write a checkpoint after the steps
  int layers = 28, steps = 3, batch = 4, seq = 64, hidden = 1024, heads = 16, kv_heads = 8, head_dim = 128;
  int ffn = 3072, vocab = 151936, checkpointing = 0;
  double limit_gib = 0;
  long long logits_chunk_bytes = 64LL << 20;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--sharding") {
      o.sharding = v;
      if (o.sharding != "none" && o.sharding != "optimizer" && o.sharding != "parameters") {
        std::fprintf(stderr, "bench_trainer_memory: --sharding %s: none, optimizer or parameters\n", v);
        std::exit(2);
      }
    } else if (k == "--grad-sync")
      o.grad_sync = v;
    else if (k == "--layers")
      o.layers = std::atoi(v);
    else if (k == "--steps")
      o.steps = std::atoi(v);
    else if (k == "--batch")
      o.batch = std::atoi(v);
    else if (k == "--seq")
      o.seq = std::atoi(v);
    else if (k == "--hidden")
      o.hidden = std::atoi(v);
    else if (k == "--heads")
      o.heads = std::atoi(v);
    else if (k == "--kv-heads")
      o.kv_heads = std::atoi(v);
    else if (k == "--head-dim")
      o.head_dim = std::atoi(v);
    else if (k == "--ffn")
      o.ffn = std::atoi(v);
    else if (k == "--vocab")
      o.vocab = std::atoi(v);
    else if (k == "--checkpointing")
      o.checkpointing = std::atoi(v);
    else if (k == "--limit-gib")
      o.limit_gib = std::atof(v);
    else if (k == "--logits-chunk-bytes")
      o.logits_chunk_bytes = std::atoll(v);
    else if (k == "--checkpoint")
      o.checkpoint = v;
    else {
      std::fprintf(stderr, "bench_trainer_memory: unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return o;
}

// B sequences of T tokens in groups of 2, the policy's tokens the second half.
TrainBatch randomBatch(const Options& o, int rank, int step) {
  torch::manual_seed(1000 * rank + step);
  std::vector<TrainingSample> eps;
  std::vector<std::int64_t> groups;
  const auto ids = torch::randint(1, o.vocab, {o.batch, o.seq}, torch::kLong);
  for (int b = 0; b < o.batch; ++b) {
    TrainingSample e;
    for (int t = 0; t < o.seq; ++t) {
      e.tokens.push_back(static_cast<std::int32_t>(ids[b][t].item<std::int64_t>()));
      e.policy_mask.push_back(t >= o.seq / 2 ? 1 : 0);
      e.behav_logprobs.push_back(t >= o.seq / 2 ? -12.0f : 0.0f);
    }
    e.reward = static_cast<double>((b + step) % 2);
    eps.push_back(e);
    groups.push_back(b / 2);
  }
  return collate(eps, groups, 0);
}

ModelConfig modelOf(const Options& o) {
  ModelConfig m;
  m.vocab_size = o.vocab;
  m.d_model = o.hidden;
  m.layers = o.layers;
  m.heads = o.heads;
  m.kv_heads = o.kv_heads;
  m.head_dim = o.head_dim;
  m.ffn_hidden = o.ffn;
  m.max_seq_len = o.seq;
  return m;
}

// This rank's private memory (RssAnon) before, at its peak during and after the checkpoint write.
struct CheckpointMemory {
  std::uint64_t before = 0, peak = 0, after = 0;
};

CheckpointMemory writeCheckpoint(const Options& o, PolicyTrainer& trainer, const Comm& comm) {
  comm.barrier();
  CheckpointMemory out;
  out.before = currentPrivateBytes();
  {
    PrivateMemoryPeak during(std::chrono::milliseconds(10));
    saveTrainerCheckpoint(o.checkpoint + "/bench.h5", "bench", trainer, o.steps);
    out.peak = during.peakBytes();
  }
  out.after = currentPrivateBytes();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 0;
  {
    const Options o = parse(argc, argv);
    Comm comm = Comm::duplicate(MPI_COMM_WORLD);
    if (o.limit_gib > 0) {
      rlimit lim{};
      lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(o.limit_gib * (1ULL << 30));
      setrlimit(RLIMIT_DATA, &lim);
    }
    torch::set_num_threads(1);
    std::string error;
    std::vector<double> step_seconds;
    std::uint64_t state_bytes = 0, resident_bytes = 0;
    std::int64_t params = 0;
    std::uint64_t rss_setup = 0, rss_trained = 0;  // resident after set-up and after the steps
    CheckpointMemory checkpoint;
    try {
      torch::manual_seed(7);
      PolicyModel model(modelOf(o));
      params = model->parameterCount();
      TrainerSection cfg;
      cfg.lr = 1e-5;
      cfg.grad_sync = enumByName(kGradSyncNames, o.grad_sync).value_or(TrainerSection::GradSync::C10d);
      cfg.sharding = enumByName(kShardingNames, o.sharding).value_or(TrainerSection::Sharding::None);
      cfg.activation_checkpointing = o.checkpointing != 0;
      cfg.logits_chunk_bytes = o.logits_chunk_bytes;
      PolicyTrainer trainer(model, cfg, 1.0);
      if (comm.size() > 1) trainer.setDataParallel(&comm);
      rss_setup = memoryUse(torch::kCPU).rss_bytes;
      for (int s = 0; s < o.steps; ++s) {
        const TrainBatch batch = randomBatch(o, comm.rank(), s);
        comm.barrier();
        const auto t = std::chrono::steady_clock::now();
        trainer.rlStep(batch);
        step_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
      }
      state_bytes = trainer.optimizerStateBytes();
      // Weights and gradients held between steps: the model's whole (unsharded), or the shards.
      resident_bytes = trainer.zero() ? trainer.zero()->residentBytes() : static_cast<std::uint64_t>(params) * 8;
      rss_trained = memoryUse(torch::kCPU).rss_bytes;
      if (!o.checkpoint.empty()) checkpoint = writeCheckpoint(o, trainer, comm);
    } catch (const std::exception& e) {
      error = e.what();
      const auto nl = error.find('\n');
      if (nl != std::string::npos) error.resize(nl);
      for (char& c : error) {
        if (c == '"' || c == '\\') c = '\'';  // one JSON string
      }
    }
    const MemoryUse mem = memoryUse(torch::kCPU);
    std::string steps;
    for (const double s : step_seconds) steps += (steps.empty() ? "" : ", ") + std::to_string(s);
    std::printf(
        "{\"rank\": %d, \"ranks\": %d, \"sharding\": \"%s\", \"grad_sync\": \"%s\", \"layers\": %d, \"parameters\": "
        "%lld, "
        "\"peak_rss_gib\": %.3f, \"rss_setup_gib\": %.3f, \"rss_trained_gib\": %.3f, \"optimizer_state_gib\": %.3f, "
        "\"weights_grads_gib\": %.3f, "
        "\"limit_gib\": %.1f, \"logits_chunk_bytes\": %lld, \"step_seconds\": [%s], \"checkpoint_private_gib\": "
        "[%.3f, %.3f, %.3f], \"error\": \"%s\"}\n",
        comm.rank(), comm.size(), o.sharding.c_str(), o.grad_sync.c_str(), o.layers, static_cast<long long>(params),
        static_cast<double>(mem.peak_rss_bytes) / (1ULL << 30), static_cast<double>(rss_setup) / (1ULL << 30),
        static_cast<double>(rss_trained) / (1ULL << 30), static_cast<double>(state_bytes) / (1ULL << 30),
        static_cast<double>(resident_bytes) / (1ULL << 30), o.limit_gib, o.logits_chunk_bytes, steps.c_str(),
        static_cast<double>(checkpoint.before) / (1ULL << 30), static_cast<double>(checkpoint.peak) / (1ULL << 30),
        static_cast<double>(checkpoint.after) / (1ULL << 30), error.c_str());
    std::fflush(stdout);
    if (!error.empty()) {
      code = 3;
      MPI_Abort(MPI_COMM_WORLD, 3);  // its peers may wait in a collective it never entered
    }
  }
  MPI_Finalize();
  return code;
}
