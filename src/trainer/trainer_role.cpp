// A trainer group's loop: pull a batch, optimise, publish the new version. The trainer never
// waits for rollouts to take a version.
//
// Data parallelism: rank 0 of the group pulls each batch and broadcasts it over the group's
// comm; every rank trains on its share of the groups (group k goes to rank k mod D) and the
// gradients are averaged before each optimiser step, so all ranks keep bit-identical weights.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "astraflow/trainer/trainer_role.hpp"

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/mpi.hpp"
#include "astraflow/core/records.hpp"
#include "astraflow/core/run_files.hpp"
#include "astraflow/model/checkpoint.hpp"
#include "astraflow/model/device.hpp"
#include "astraflow/model/model_builder.hpp"
#include "astraflow/model/weight_blob.hpp"
#include "astraflow/trainer/micro_batches.hpp"
#include "astraflow/trainer/policy_trainer.hpp"
#include "astraflow/trainer/trainer_checkpoint.hpp"
#include "astraflow/weights/delta_codec.hpp"

namespace astraflow {

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class TrainerRank {
 public:
  explicit TrainerRank(const TrainerPorts& ports)
      : ports_(ports),
        ctx_(ports.ctx),
        policy_(ports.policy),
        comm_(ports.group),
        trainer_(buildPolicyModel(ctx_.cfg, ports.tokens, policy_,
                                  resolveDevice(ctx_.cfg.trainer.compute.device, ctx_.device_slot, "trainer.device")),
                 ctx_.cfg.trainer, ctx_.cfg.rollout.temperature) {
    if (comm_.size() > 1) trainer_.setDataParallel(&comm_);
    trainer_.setScheduleLength(static_cast<std::int64_t>(ctx_.cfg.run.versions) * ctx_.cfg.trainer.ppo_epochs *
                               ctx_.cfg.trainer.mini_batches);
  }

  TrainerReport run();
  // The figures so far (the end adds the final weights' checksum).
  TrainerReport report();

 private:
  void warmStart();
  bool nextBatch(Batch& batch);
  void stage();
  void checkpoint(bool final = false);
  void recordMemory();  // a `memory` trace event; the peaks go in the report
  // trainer.simulate: the modelled step time slept instead of a backward pass, and the next
  // synthetic weight version in blob_ (rank 0).
  RlStepStats simulateStep(const std::vector<TrainingSample>& episodes, const std::vector<std::int64_t>& groups);
  void nextSyntheticVersion();

  const TrainerPorts& ports_;
  const RoleContext& ctx_;
  std::string policy_;
  const Comm& comm_;
  PolicyTrainer trainer_;
  std::int64_t version_ = 0;
  std::int64_t last_checkpoint_ = -1;
  std::uint64_t checkpoints_skipped_ = 0;  // for want of disk space
  std::vector<std::byte> record_, blob_;
  // Report.
  std::uint64_t foreign_ = 0, remote_ = 0;  // trained: other policies' / remote sites' trajectories
  std::uint64_t steps_ = 0, trajectories_ = 0, tokens_ = 0, version_mismatches_ = 0, stale_violations_ = 0;
  std::uint64_t micro_batches_ = 0, forward_tokens_ = 0, sequence_tokens_ = 0;
  std::int64_t max_staleness_ = 0;
  double wait_seconds_ = 0, step_seconds_ = 0, reward_sum_ = 0, max_abs_behav_diff_ = 0;
  MemoryUse memory_;
  std::uint64_t synthetic_state_ = 0x9e3779b97f4a7c15ULL;  // trainer.simulate's weight bytes come from it
};

// splitmix64: fast enough to write gigabytes of synthetic weights per version.
std::uint64_t nextRandom(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

RlStepStats TrainerRank::simulateStep(const std::vector<TrainingSample>& episodes,
                                      const std::vector<std::int64_t>& groups) {
  const auto& sim = ctx_.cfg.trainer.simulate;
  const auto& t = ctx_.cfg.trainer;
  RlStepStats stats;
  std::vector<std::int64_t> lengths;
  for (const auto& e : episodes) {
    lengths.push_back(static_cast<std::int64_t>(e.tokens.size()));
    stats.sequence_tokens += lengths.back();
    for (const auto m : e.policy_mask) stats.tokens += m;
  }
  // The cost is in the tokens the forward passes would hold, laid out as the real trainer lays
  // them (micro-batches, padded unless trainer.packing, a group's shared prompt once with
  // trainer.shared_prefix), every mini-batch of every PPO epoch: padding is what makes a padded
  // trainer's step grow faster than its sequences' tokens.
  const auto n = static_cast<std::int64_t>(lengths.size());
  std::optional<SharedPrefixes> shared;
  if (t.shared_prefix) shared = findSharedPrefixes(episodes, groups, treePairCost(trainer_.model()->config()));
  for (int epoch = 0; epoch < t.ppo_epochs; ++epoch) {
    for (std::int64_t m = 0; m < t.mini_batches; ++m) {
      std::vector<std::int64_t> rows;
      for (std::int64_t r = n * m / t.mini_batches; r < n * (m + 1) / t.mini_batches; ++r) rows.push_back(r);
      for (const auto& micro :
           planMicroBatches(rows, lengths, t.micro_batch_tokens, t.packing, shared ? &*shared : nullptr)) {
        stats.forward_tokens += micro.cells();
        stats.micro_batches++;
      }
    }
  }
  // A data-parallel group moves at its largest share's pace (the real one meets in every step's
  // gradient all-reduce), so every rank sleeps on that share. Not costed: the no-grad start pass
  // (several mini-batches, or decoupled/M2PO losses over several micro-batches) and the
  // reference pass of kl_coef (docs/simulation.md).
  std::int64_t paced = stats.forward_tokens;
  if (comm_.size() > 1) paced = comm_.allreduceMax(paced);
  std::this_thread::sleep_for(
      std::chrono::duration<double>(sim.fixed_seconds + sim.seconds_per_token * static_cast<double>(paced)));
  return stats;
}

void TrainerRank::nextSyntheticVersion() {
  const auto& sim = ctx_.cfg.trainer.simulate;
  if (blob_.empty()) {
    const auto bytes =
        sim.weight_bytes > 0 ? static_cast<std::size_t>(sim.weight_bytes) : packedWeightBytes(*trainer_.model());
    blob_.resize(bytes & ~std::size_t{1});
    for (std::size_t i = 0; i + 8 <= blob_.size(); i += 8) {
      const std::uint64_t r = nextRandom(synthetic_state_);
      std::memcpy(blob_.data() + i, &r, 8);
    }
    return;
  }
  // changed_fraction of the bf16 words move by one unit in the last place or so, as a small
  // optimiser step moves weights: what the delta codec sees between real versions.
  auto* words = reinterpret_cast<std::uint16_t*>(blob_.data());
  const std::size_t n = blob_.size() / 2;
  const auto changes = static_cast<std::size_t>(sim.changed_fraction * static_cast<double>(n));
  for (std::size_t k = 0; k < changes; ++k) {
    const std::uint64_t r = nextRandom(synthetic_state_);
    words[r % n] = static_cast<std::uint16_t>(words[r % n] + 1 + ((r >> 40) & 3));
  }
}

void TrainerRank::recordMemory() {
  const double t = ctx_.now();
  memory_ = memoryUse(trainer_.model()->device());
  ctx_.event(TraceKind::Memory, t, version_, memory_.peak_rss_bytes, memory_.device_peak_allocated);
}

void TrainerRank::warmStart() {
  const auto& cfg = ctx_.cfg;
  const std::string init = cfg.run.init_checkpoint.empty() ? cfg.sft.checkpoint : cfg.run.init_checkpoint;
  if (ctx_.resuming()) {
    // The KL penalty's reference is the warm start, as in the first segment, not the resumed weights.
    if (cfg.trainer.loss.kl_coef > 0 && fs::exists(init)) {
      loadCheckpointFile(init, policy_, *trainer_.model());
      trainer_.freezeReference();
    }
    const auto path = trainerCheckpointPath(ctx_.run_dir, ctx_.resume_version, policy_).string();
    version_ = loadTrainerCheckpoint(path, policy_, trainer_);
    last_checkpoint_ = version_;
    if (comm_.rank() == 0) spdlog::info("resumed {} at version {} from {}", policy_, version_, path);
    return;
  }
  if (fs::exists(init)) {
    loadCheckpointFile(init, policy_, *trainer_.model());
    trainer_.freezeReference();
    if (comm_.rank() == 0) spdlog::info("warm start of {} from {}", policy_, init);
  } else if (!cfg.run.init_checkpoint.empty()) {
    throw Error(fmt::format("run.init_checkpoint: '{}' does not exist (run `astraflow sft` first)", init));
  } else if (comm_.rank() == 0) {
    const std::string& folder = trainer_.model()->config().hf_path;
    if (folder.empty())
      spdlog::warn("no warm start at {}; {} starts from random weights", init, policy_);
    else
      spdlog::info("no warm start at {}; {} starts from its Hugging Face folder {}", init, policy_, folder);
  }
}

// Rank 0 pulls; the group receives the same bytes. False at the end of the stream.
bool TrainerRank::nextBatch(Batch& batch) {
  const double t = ctx_.now();
  if (comm_.rank() == 0) {
    auto& ring = *ports_.batches;
    Backoff backoff(2000us);
    while (!ring.tryPop(record_)) backoff.wait();
  }
  record_ = comm_.broadcastBytes(0, std::move(record_));
  auto decoded = decodeBatch(record_);
  if (!decoded) throw Error("malformed batch record from the dataflow rank: " + decoded.error());
  batch = std::move(decoded).value();
  if (isEndOfStream(batch)) return false;
  // Until the batch is usable (decoded): the same span as the trace's batch_wait event.
  wait_seconds_ += ctx_.now() - t;
  ctx_.event(TraceKind::BatchWait, t, version_);
  return true;
}

void TrainerRank::stage() {
  const bool simulated = ctx_.cfg.trainer.simulate.enabled;
  const bool sharded_weights = trainer_.zero() && trainer_.zero()->shardsParameters() && !simulated;
  if (comm_.rank() != 0 && !sharded_weights) return;
  if (simulated) {
    nextSyntheticVersion();
  } else {
    trainer_.packWeights(blob_);  // collective when the weights are sharded
  }
  if (comm_.rank() != 0) return;
  const double t = ctx_.now();
  ports_.store->stage(version_, blob_, {wait_seconds_, step_seconds_});
  ctx_.event(TraceKind::WeightStage, t, version_, blob_.size(), 1);
}

void TrainerRank::checkpoint(bool final) {
  // A checkpoint its filesystem cannot hold is skipped (the group decides together: a sharded
  // write is collective): an HDF5 write that fails part-way aborts the rank, and the run with it.
  int fits = 1;
  if (comm_.rank() == 0) {
    const CheckpointRoom room = checkpointRoom(ctx_.run_dir, trainerCheckpointBytes(trainer_));
    if (!room.fits) {
      fits = 0;
      ++checkpoints_skipped_;
      spdlog::warn("checkpoint v{} of {} skipped: {}; the run goes on", version_, policy_, room.why);
    }
  }
  if (comm_.size() > 1) fits = comm_.broadcastValue(0, fits);
  if (fits == 0) {
    last_checkpoint_ = version_;
    return;
  }
  if (trainer_.zero() && comm_.rank() != 0) {  // sharded: rank 0 gathers from every shard
    saveTrainerCheckpoint(trainerCheckpointPath(ctx_.run_dir, version_, policy_).string(), policy_, trainer_, version_);
  } else if (comm_.rank() == 0) {
    const double t = ctx_.now();
    const auto path = trainerCheckpointPath(ctx_.run_dir, version_, policy_).string();
    const auto bytes = saveTrainerCheckpoint(path, policy_, trainer_, version_, ctx_.run_id);
    ctx_.event(TraceKind::Checkpoint, t, version_, bytes, 1);
    const int every = ctx_.cfg.run.export_hf_every;
    if (ports_.export_hf && every > 0 && (version_ % every == 0 || final)) {
      const double e = ctx_.now();
      ports_.export_hf(path, version_);
      ctx_.event(TraceKind::ExportHf, e, version_, 0, 1);
    }
  }
  last_checkpoint_ = version_;
}

TrainerReport TrainerRank::run() {
  const auto& cfg = ctx_.cfg;
  warmStart();
  stage();
  const int ranks = comm_.size();
  Batch batch;
  while (nextBatch(batch)) {
    const double t = ctx_.now();
    if (batch.trainer_version != version_) ++version_mismatches_;
    // Split by whole groups (advantages are per group); every rank steps, even with no share.
    std::vector<TrainingSample> episodes;
    std::vector<std::int64_t> groups;
    std::int64_t group_index = -1;
    std::uint64_t last_group = ~std::uint64_t{0};
    for (auto& traj : batch.trajectories) {
      const std::int64_t staleness = version_ - traj.weight_version_min;
      max_staleness_ = std::max(max_staleness_, staleness);
      if (staleness > batch.max_staleness) ++stale_violations_;
      if (traj.group_id != last_group) {
        ++group_index;
        last_group = traj.group_id;
      }
      reward_sum_ += traj.rewards.empty() ? 0.0 : traj.rewards[0];
      if (traj.policy != policy_) ++foreign_;  // generated by another policy's weights (a router's choice)
      if (group_index % ranks != comm_.rank()) continue;
      TrainingSample e;
      e.problem_id = traj.problem_id;
      e.tokens = std::move(traj.tokens);
      e.behav_logprobs = std::move(traj.behav_logprobs);
      e.policy_mask = std::move(traj.policy_mask);
      e.reward = traj.rewards.empty() ? 0.0 : traj.rewards[0];
      e.turns = static_cast<int>(traj.turns);
      e.truncated = traj.status == static_cast<std::uint8_t>(TrajectoryStatus::Truncated);
      for (auto m : e.policy_mask) tokens_ += m;
      episodes.push_back(std::move(e));
      groups.push_back(group_index);
    }
    const auto stats = cfg.trainer.simulate.enabled ? simulateStep(episodes, groups)
                                                    : trainer_.rlStep(collate(episodes, groups, ports_.tokens.pad_id));
    max_abs_behav_diff_ = std::max(max_abs_behav_diff_, stats.max_abs_behav_diff);
    micro_batches_ += static_cast<std::uint64_t>(stats.micro_batches);
    forward_tokens_ += static_cast<std::uint64_t>(stats.forward_tokens);
    sequence_tokens_ += static_cast<std::uint64_t>(stats.sequence_tokens);
    trajectories_ += batch.trajectories.size();
    for (const auto& traj : batch.trajectories) remote_ += traj.pool_uid >= kSitePoolUidBase;
    ++steps_;
    ++version_;
    step_seconds_ += ctx_.now() - t;
    ctx_.event(TraceKind::TrainStep, t, version_, static_cast<std::uint64_t>(stats.tokens), batch.trajectories.size());
    recordMemory();
    stage();
    const bool due = (cfg.run.checkpoint_every > 0 && version_ % cfg.run.checkpoint_every == 0) ||
                     (cfg.run.export_hf_every > 0 && version_ % cfg.run.export_hf_every == 0);
    if (due) checkpoint();
    ctx_.snapshot([this] { return report(); });
  }
  if (last_checkpoint_ != version_) checkpoint(true);

  // Parameter sharding: rank 0 alone holds the blob. Simulated: the last synthetic version.
  if (!cfg.trainer.simulate.enabled) trainer_.packWeights(blob_);
  TrainerReport r = report();
  spdlog::info("trainer {} rank {}: peak RSS {:.1f} MiB{}", policy_, comm_.rank(),
               static_cast<double>(memory_.peak_rss_bytes) / (1 << 20),
               trainer_.model()->device().is_cuda()
                   ? fmt::format(", peak CUDA allocated {:.1f} MiB",
                                 static_cast<double>(memory_.device_peak_allocated) / (1 << 20))
                   : std::string());
  // The checksum the rollout ranks' replicas keep (0 on a parameter-sharded rank other than 0).
  r.weights_hash = blob_.empty() ? 0 : weightsHash(blob_);
  return r;
}

TrainerReport TrainerRank::report() {
  TrainerReport r;
  r.steps = steps_;
  r.final_version = version_;
  r.trajectories_trained = trajectories_;
  r.tokens_trained = tokens_;
  r.batch_wait_seconds = wait_seconds_;
  r.step_seconds = step_seconds_;
  r.foreign_trajectories = foreign_;
  r.trajectories_from_remote_sites = remote_;
  r.max_staleness = max_staleness_;
  r.staleness_violations = stale_violations_;
  r.version_mismatches = version_mismatches_;
  r.checkpoints_skipped = checkpoints_skipped_;
  r.skipped_steps = trainer_.skippedSteps();
  r.mean_reward = trajectories_ ? reward_sum_ / static_cast<double>(trajectories_) : 0.0;
  r.max_abs_behav_diff = max_abs_behav_diff_;
  r.micro_batches = micro_batches_;
  r.forward_tokens = forward_tokens_;
  r.sequence_tokens = sequence_tokens_;
  recordMemory();
  r.peak_rss_bytes = memory_.peak_rss_bytes;
  r.device_peak_bytes = memory_.device_peak_allocated;
  r.optimizer_state_bytes = trainer_.optimizerStateBytes();
  return r;
}

}  // namespace

TrainerReport runTrainerRole(const TrainerPorts& ports) {
  configureThreads(ports.ctx.cfg, ports.ctx.ranks_on_node, ports.ctx.cfg.trainer.compute.threads);
  return TrainerRank(ports).run();
}

}  // namespace astraflow
