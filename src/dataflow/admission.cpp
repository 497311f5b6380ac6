// Admission: which training tasks the dataflow rank sends out, and when: per admission unit, the room the staleness
// capacity rule leaves, filled with prompts from the prompt source through the curators into the carrier's outbox.
#include "dataflow/admission.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <map>

namespace astraflow::dataflow_detail {

Admission::Admission(const Config& cfg, Environment& env, std::vector<PolicyState>& policies,
                     std::vector<AdmissionUnit> units)
    : cfg_(cfg), env_(env), policies_(policies), units_(std::move(units)), curator_rng_(cfg.run.seed * 31 + 7) {
  for (const auto& spec : cfg_.dataflow.curators) curators_.push_back(makeCurator(spec));
}

bool Admission::admit() {
  if (stopped_) return false;
  bool did = false;
  for (const auto& unit : units_) did |= admitUnit(unit);
  return did;
}

// Admits groups for one unit: the tightest room of its members under the capacity rule (each
// task yields a group of trajectories for every member), enough for the member that needs the
// most, and counts the tasks in flight for each member.
bool Admission::admitUnit(const AdmissionUnit& unit) {
  const int group_size = cfg_.rollout.group_size;
  for (auto m : unit.members) {
    if (policies_[m].published < 0) return false;  // no weights yet: nothing could be generated
  }
  auto& carrier = policies_[unit.carrier];
  std::int64_t groups = 0;
  std::map<std::string, std::string> meta;
  if (cfg_.run.mode == RunMode::Sync) {
    // Colocated-synchronous baseline: one batch of rollouts with the current weights, only
    // while every member's trainer is idle, then nothing until their next versions are out.
    bool idle = true, wanted = false;
    std::int64_t ready = std::numeric_limits<std::int64_t>::max();
    for (auto m : unit.members) {
      const auto& p = policies_[m];
      idle &= p.published == p.next_batch && p.in_flight == 0 && !p.pending_batch;
      wanted |= p.next_batch < p.target;
      ready = std::min(ready, static_cast<std::int64_t>(p.assembler->readyGroups()));
    }
    if (idle && wanted) {
      groups = cfg_.trainer.groups_per_step - ready;
      for (auto m : unit.members) {
        const auto& p = policies_[m];
        meta[m == unit.carrier ? std::string(kTaskMinVersionKey) : std::string(kTaskMinVersionKey) + "." + p.name] =
            std::to_string(p.published);
      }
    }
  } else {
    std::int64_t room = std::numeric_limits<std::int64_t>::max(), needed = 0;
    for (auto m : unit.members) {
      const auto& p = policies_[m];
      room = std::min(room, p.assembler->admissionRoom(p.published, p.in_flight));
      // Enough for the remaining versions only.
      needed = std::max(needed, (p.target - p.next_batch) * p.assembler->batchTrajectories() - p.in_flight -
                                    static_cast<std::int64_t>(p.assembler->buffered()));
    }
    groups = std::min(room / group_size, needed / group_size + (needed > 0 ? 1 : 0));
  }
  // Keep the outbox short: admission happens as task-ring space frees up, not all at once.
  groups = std::min<std::int64_t>(
      groups, std::max<std::int64_t>(
                  0, 2 * cfg_.trainer.groups_per_step - static_cast<std::int64_t>(carrier.outbox.size()) / group_size));
  bool did = false;
  for (std::int64_t g = 0; g < groups; ++g) {
    std::uint64_t problem = 0;
    if (!nextAdmittedProblem(carrier.published, problem)) break;
    const std::uint64_t group = cursor_.next_group_id++;
    for (int i = 0; i < group_size; ++i) {
      Task t = makeTask(carrier.name, problem, group, static_cast<std::uint32_t>(i));
      t.metadata = meta;
      carrier.outbox.push_back(std::move(t));
    }
    for (auto m : unit.members) policies_[m].in_flight += group_size;
    did = true;
  }
  return did;
}

std::uint64_t Admission::stop(const std::function<bool(const Task&)>& keep) {
  stopped_ = true;
  std::uint64_t dropped = 0;
  for (const auto& unit : units_) {
    auto& carrier = policies_[unit.carrier];
    std::deque<Task> kept;
    for (auto& t : carrier.outbox) {
      if (keep(t)) {
        kept.push_back(std::move(t));
      } else {
        ++dropped;
        for (auto m : unit.members) --policies_[m].in_flight;  // it was in flight for every member
      }
    }
    carrier.outbox = std::move(kept);
  }
  return dropped;
}

void Admission::observeGroup(std::uint64_t problem, const std::vector<double>& rewards) {
  if (curators_.empty()) return;
  const PromptInfo prompt = promptInfo(problem, 0);
  for (auto& c : curators_) {
    try {
      c->observe(prompt, rewards);
    } catch (const std::exception& e) {
      if (c->counters().errors++ < 3) spdlog::warn("curator {}: observe failed: {}", c->name(), e.what());
    }
  }
}

Task Admission::makeTask(const std::string& policy, std::uint64_t problem, std::uint64_t group, std::uint32_t index) {
  Task t;
  t.task_id = cursor_.next_task_id++;
  t.problem_id = problem;
  t.group_id = group;
  t.group_index = index;
  t.policy = policy;
  t.kind = cfg_.environment.name;
  return t;
}

// The prompt source: endless new training problems, or (dataflow.prompt_pool = N) epochs over
// the first N training problems, each epoch in its own shuffled order. A function of the cursor
// alone, so a resumed run continues the same sequence.
std::uint64_t Admission::nextProblem() {
  const std::uint64_t k = cursor_.next_problem++;
  const std::uint64_t n = cfg_.dataflow.prompt_pool;
  if (n == 0) return env_.trainingId(k);
  const std::uint64_t epoch = k / n;
  if (epoch != prompt_epoch_) {
    prompt_order_.resize(n);
    for (std::uint64_t i = 0; i < n; ++i) prompt_order_[i] = i;
    std::mt19937_64 shuffle_rng(cfg_.run.seed * 7919 + epoch);
    std::shuffle(prompt_order_.begin(), prompt_order_.end(), shuffle_rng);
    prompt_epoch_ = epoch;
  }
  return env_.trainingId(prompt_order_[k % n]);
}

PromptInfo Admission::promptInfo(std::uint64_t problem, std::int64_t version) {
  return PromptInfo{problem, version, env_.metadataOf(problem)};
}

// The next prompt every curator admits. Gives up after a bounded number of skips (admission
// tries again on a later iteration) so a curator that skips everything cannot stall the loop.
bool Admission::nextAdmittedProblem(std::int64_t version, std::uint64_t& problem) {
  for (int attempt = 0; attempt < 4096; ++attempt) {
    problem = nextProblem();
    if (curators_.empty()) return true;
    const PromptInfo prompt = promptInfo(problem, version);
    bool admitted = true;
    for (auto& c : curators_) {
      try {
        admitted = c->admit(prompt, curator_rng_);
      } catch (const std::exception& e) {
        if (c->counters().errors++ < 3)
          spdlog::warn("curator {}: admit failed (prompt admitted): {}", c->name(), e.what());
        admitted = true;
      }
      if (!admitted) break;
    }
    if (admitted) return true;
  }
  return false;
}

}  // namespace astraflow::dataflow_detail
