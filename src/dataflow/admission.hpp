#pragma once
// Which new training tasks go out, and when. Per admission unit (a policy, or a team carried by
// its first role's policy): the room the staleness capacity rule leaves (run.mode sync: one
// batch while every member's trainer is idle), enough for the versions that remain; the prompts
// come from the prompt source (endless new problems, or epochs over dataflow.prompt_pool in a
// shuffled order) through the curators. Admitted tasks wait in the carrier's outbox, which
// DataflowRank::flushOutbox hands to the task sinks. Private to src/dataflow.
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/dataflow/plugins.hpp"
#include "astraflow/tasks/environment.hpp"
#include "dataflow/policy_state.hpp"

namespace astraflow::dataflow_detail {

class Admission {
 public:
  // Where the prompt sequence and the ids stand (saved in checkpoints).
  struct Cursor {
    std::uint64_t next_problem = 0, next_task_id = 0, next_group_id = 0;
  };

  Admission(const Config& cfg, Environment& env, std::vector<PolicyState>& policies, std::vector<AdmissionUnit> units);

  // Admits what each unit has room for; false when nothing was (or admission has stopped).
  bool admit();
  // The end of the run proper: nothing more is admitted, and the training tasks still in the
  // outboxes are dropped (no longer in flight for any member) except those `keep` names.
  // Returns how many were dropped.
  std::uint64_t stop(const std::function<bool(const Task&)>& keep);

  // A task with the next id (evaluation tasks use it too).
  Task makeTask(const std::string& policy, std::uint64_t problem, std::uint64_t group, std::uint32_t index);
  // A complete group's rewards: the curators learn from them (a curator that throws is counted).
  void observeGroup(std::uint64_t problem, const std::vector<double>& rewards);

  const std::vector<std::unique_ptr<Curator>>& curators() const { return curators_; }
  Cursor cursor() const { return cursor_; }
  void restore(const Cursor& cursor) { cursor_ = cursor; }

 private:
  bool admitUnit(const AdmissionUnit& unit);
  std::uint64_t nextProblem();
  bool nextAdmittedProblem(std::int64_t version, std::uint64_t& problem);
  PromptInfo promptInfo(std::uint64_t problem, std::int64_t version);

  const Config& cfg_;
  Environment& env_;
  std::vector<PolicyState>& policies_;
  std::vector<AdmissionUnit> units_;
  std::vector<std::unique_ptr<Curator>> curators_;
  std::mt19937_64 curator_rng_;
  Cursor cursor_;
  bool stopped_ = false;
  std::vector<std::uint64_t> prompt_order_;  // this epoch's order of the prompt pool
  std::uint64_t prompt_epoch_ = ~std::uint64_t{0};
};

}  // namespace astraflow::dataflow_detail
