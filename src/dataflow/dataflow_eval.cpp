// The dataflow rank's evaluation set-up: which sets a round takes, what it records of each answer
// (the policy's text, decoded here) and of each problem (its reference answer), the evaluation
// table <run>/eval.h5, and the best round so far (run.keep_best; docs/tasks.md "Evaluation").
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dataflow/dataflow_rank.hpp"

namespace astraflow::dataflow_detail {

std::vector<EvalSetPlan> DataflowRank::evalPlans() const { return planEvalSets(cfg_.eval, *env_); }

void DataflowRank::setUpEvaluation() {
  if (!eval_.enabled()) return;
  const std::string path = (w_.run_dir / "eval.h5").string();
  eval_table_ = std::make_unique<io::EvalTableWriter>(path, /*truncate=*/!w_.resume);
  if (!w_.resume && !w_.run_id.empty()) eval_table_->tagRun(w_.run_id);
  eval_tokenizer_ = makeEnvironmentTokenizer(cfg_.environment);
  eval_.setResponseText([this](const Trajectory& t) {
    std::vector<std::int32_t> own;  // the policy's tokens: its answer, without prompt or tool replies
    own.reserve(t.tokens.size());
    for (std::size_t i = 0; i < t.tokens.size() && i < t.policy_mask.size(); ++i)
      if (t.policy_mask[i] != 0) own.push_back(t.tokens[i]);
    return eval_tokenizer_->decode(own);
  });
  eval_.setAnswerOf([this](std::uint64_t problem_id) { return env_->referenceAnswer(problem_id); });
  eval_.setRoundDone([this](const EvalRound& round) { evalRoundDone(round); });
}

void DataflowRank::evalRoundDone(const EvalRound& round) {
  const EvalRoundResult& r = round.result;
  try {
    eval_table_->write(r);
  } catch (const std::exception& e) {
    // The scores still reach the log, the trace and the summary.
    if (eval_table_failures_++ == 0) spdlog::error("eval: {} not written: {}", eval_table_->path(), e.what());
  }
  // The best round: answered at one version > 0 (a version a trainer checkpointed), strictly
  // better than the best so far, so the earliest of equal rounds is kept.
  if (r.version_high <= 0 || r.version_low != r.version_high || r.meanAccuracy() <= best_.mean) return;
  best_.version = r.version_high;
  best_.mean = r.meanAccuracy();
  best_.sets.clear();
  for (const auto& s : r.sets) best_.sets.push_back({s.name, s.accuracy, s.pass_at_k, s.problems, s.samples});
}

}  // namespace astraflow::dataflow_detail
