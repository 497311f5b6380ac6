// The chat workflows (src/rollout/code_workflow.hpp, docs/multi-policy.md):
//
//   solver_testgen   the Solver writes a program; the Test-Case Generator, shown the problem and
//                    that program, writes test cases as one ```json block; the program runs on
//                    them in the sandbox and, when one fails and rounds remain, the Solver gets the
//                    failing case as its next user message and tries again (paper §4.1, A.3).
//   solver_selector  the Solver writes two programs (the second as a follow-up in the same
//                    conversation); the Selector ends with <final>A</final> or <final>B</final>.
//   solver_verifier  on text (the paper's math team, A.9 prompts): the Solver answers; the
//                    Verifier ends with <verify>approve</verify> or <verify>reject</verify>; a
//                    rejected answer goes back to the Solver with the Verifier's analysis.
//
// The team's outcome is the final (or picked) program on the row's hidden tests, scored by the
// environment's `code` reward (solver_verifier: the final answer by the environment's reward). Each role's transcript
// is a chat conversation: its system and user messages rendered by the policy's template (mask 0), its own turns (mask
// 1), and the solver's follow-ups appended as the template continues a conversation after a turn.
#include "rollout/code_workflow.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/code_reward.hpp"
#include "astraflow/tasks/reward_function.hpp"
#include "astraflow/text/chat_template.hpp"
#include "rollout/workflow_text.hpp"

namespace astraflow::detail {
namespace {

using json = nlohmann::ordered_json;
// Generated test cases run per attempt, at most: each is one sandboxed run.
constexpr std::size_t kMaxGeneratedTests = 8;
// Of each text the failing case shows the solver.
constexpr std::size_t kFeedbackBytes = 1024;

const ChatTemplate& chatTemplateOf(const std::string& folder) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<ChatTemplate>> cache;
  std::lock_guard lock(mutex);
  auto& slot = cache[folder];
  if (!slot) slot = std::make_unique<ChatTemplate>(ChatTemplate::load(folder));
  return *slot;
}

std::string cut(const std::string& s) {
  return s.size() <= kFeedbackBytes ? s : s.substr(0, kFeedbackBytes) + "\n[cut]";
}

// What the solver is told about the first generated test its program failed.
std::string feedbackOf(const CodeFailure& f) {
  std::string out;
  if (f.test.kind == CodeTest::Kind::Stdio) {
    out = fmt::format("Input:\n{}\nExpected output:\n{}\nYour program's output:\n{}", cut(f.test.input),
                      cut(f.test.output), cut(f.got));
  } else {
    out = fmt::format("Test:\n{}", cut(f.test.code));
  }
  if (f.outcome != SandboxOutcome::Exited) out += fmt::format("\nIt ended with: {}", sandboxOutcomeName(f.outcome));
  if (!f.error.empty()) out += "\nError output:\n" + cut(f.error);
  return out;
}

class ChatTeams {
 public:
  ChatTeams(const WorkflowSection& wf, const PolicyGenerate& generate, const Tokenizer& tok,
            const EnvironmentOptions& env_options, const std::vector<std::uint64_t>& ids,
            const SamplingOptions& sampling)
      : wf_(wf),
        generate_(generate),
        tok_(tok),
        chat_(chatTemplateOf(env_options.dataset.tokenizer_folders.at(0))),
        sampling_(sampling),
        code_options_(codeRewardOptions(env_options.reward)),
        team_(ids.size()),
        states_(ids.size()) {
    if (!env_options.dataset.enable_thinking.empty())
      chat_options_.extra["enable_thinking"] = env_options.dataset.enable_thinking == "true";
    sampling_.stop_token_ids = {tok.eosId()};
    code_options_.all_or_nothing = true;  // generated tests: the first failure is the feedback
    for (std::size_t i = 0; i < ids.size(); ++i) {
      envs_.push_back(makeEnvironment(env_options));
      envs_.back()->reset(ids[i]);
      team_[i].problem_id = ids[i];
      states_[i].problem = envs_.back()->problemText().value_or("");
      states_[i].task_description = withoutFormatSuffix(states_[i].problem);
      team_[i].roles.resize(wf.roles.size());
      for (auto& e : team_[i].roles) e.problem_id = ids[i];
    }
  }

  std::vector<TeamEpisode> run() {
    if (!team_.empty()) {
      if (wf_.kind == WorkflowKind::SolverTestgen) runTestgen();
      if (wf_.kind == WorkflowKind::SolverSelector) runSelector();
      if (wf_.kind == WorkflowKind::SolverVerifier) runVerifier();
    }
    for (auto& t : team_)
      for (auto& e : t.roles)
        if (e.turns == 0) e.truncated = true;  // never got a turn: nothing to train on
    return std::move(team_);
  }

 private:
  std::size_t role(const std::string& name) const {
    for (std::size_t r = 0; r < wf_.roles.size(); ++r)
      if (wf_.roles[r].name == name) return r;
    throw std::invalid_argument(fmt::format("workflow {} has no role '{}'", wf_.kindName(), name));
  }

  // One turn of role `r` for the episodes in `active`: a role's first turn opens its conversation
  // (system and user message), a later one continues it with `followup` as the user's message.
  // Returns each episode's generated text ("" when it had no room or non-finite logits).
  std::vector<std::string> turn(std::size_t r, const std::vector<std::size_t>& active, const std::string& followup) {
    const WorkflowRole& w = wf_.roles[r];
    std::vector<std::vector<std::int32_t>> prompts;
    for (auto i : active) {
      Episode& e = team_[i].roles[r];
      if (e.turns == 0) {
        json messages = json::array();
        if (!w.system.empty()) messages.push_back({{"role", "system"}, {"content", render(w.system, states_[i])}});
        messages.push_back({{"role", "user"}, {"content", render(w.context, states_[i])}});
        ChatOptions open = chat_options_;
        open.add_generation_prompt = true;
        appendContext(e, tok_, chat_.render(messages, open));
      } else {
        if (e.tokens.back() != tok_.eosId()) {  // a turn cut at max_new_tokens: close it as the template would
          e.tokens.push_back(tok_.eosId());
          e.behav_logprobs.push_back(0.0f);
          e.policy_mask.push_back(0);
        }
        const json message = {{"role", "user"}, {"content", render(followup, states_[i])}};
        appendContext(e, tok_, chat_.continuation(message, chat_options_));
      }
      prompts.push_back(e.tokens);
    }
    const auto gens = generate_(w.policy, prompts, sampling_);
    std::vector<std::string> texts(active.size());
    for (std::size_t a = 0; a < active.size(); ++a) {
      const Generation& g = gens.at(a);
      if (appendTurn(team_[active[a]].roles[r], g)) texts[a] = tok_.decode(g.tokens);
    }
    return texts;
  }

  std::vector<std::size_t> everyEpisode() const {
    std::vector<std::size_t> all(team_.size());
    std::iota(all.begin(), all.end(), 0);
    return all;
  }

  // The program's score on the row's hidden tests (the environment's code reward).
  StepResult hidden(std::size_t i, const std::string& answer) { return envs_[i]->step(answer); }

  void setRewards(std::size_t i, double team, double own, const std::string& reason) {
    team_[i].team_reward = team;
    for (std::size_t r = 0; r < wf_.roles.size(); ++r) {
      team_[i].roles[r].reward = wf_.roles[r].reward == RoleReward::OwnCorrect ? own : team;
      team_[i].roles[r].reward_reason = reason;
    }
  }

  void runTestgen() {
    const std::size_t solver = role("solver"), generator = role("generator");
    const std::size_t n = team_.size();
    const std::vector<std::size_t> all = everyEpisode();
    std::vector<std::string> last = turn(solver, all, "");
    for (std::size_t i = 0; i < n; ++i) {
      team_[i].rounds = 1;
      states_[i].solution = extractCode(last[i]).value_or(last[i]);
    }
    const auto cases = turn(generator, all, "");
    std::vector<std::vector<CodeTest>> tests(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto block = extractFencedBlock(cases[i], {"", "json"});
      auto parsed = block ? parseCodeTests(*block) : std::nullopt;
      if (!parsed) continue;  // no usable tests: the first program is the team's answer
      if (parsed->size() > kMaxGeneratedTests) parsed->resize(kMaxGeneratedTests);
      tests[i] = std::move(*parsed);
    }
    for (int round = 1; round < wf_.max_rounds; ++round) {
      std::vector<std::size_t> retry;
      for (std::size_t i = 0; i < n; ++i) {
        const auto code = extractCode(last[i]);
        if (tests[i].empty() || !code) continue;  // nothing to check, or no program to run
        const CodeRunReport report = runCodeTests(*code, tests[i], code_options_);
        if (!report.first_failure) continue;  // passes the generated tests: final
        states_[i].feedback = feedbackOf(*report.first_failure);
        retry.push_back(i);
      }
      if (retry.empty()) break;
      const auto again = turn(solver, retry, wf_.followup);
      for (std::size_t a = 0; a < retry.size(); ++a) {
        const std::size_t i = retry[a];
        ++team_[i].rounds;
        if (team_[i].roles[solver].nonfinite || team_[i].roles[solver].truncated) {
          tests[i].clear();  // no usable attempt: stop; the team's answer is this one
        }
        last[i] = again[a];
        states_[i].solution = extractCode(last[i]).value_or(last[i]);
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      const StepResult s = hidden(i, last[i]);
      setRewards(i, s.reward, s.reward, s.reason);
    }
  }

  // solver_verifier on text (the paper's math team): the Solver answers; the Verifier, shown the
  // problem and that answer as {team_context}, ends with <verify>approve</verify> or
  // <verify>reject</verify>; a rejected answer goes back to the Solver with the Verifier's whole
  // output as {team_context}, up to max_rounds attempts. The last attempt is final unverified; an
  // approved (or unparsed) verdict ends the team's work with that answer.
  void runVerifier() {
    const std::size_t solver = role("solver"), verifier = role("verifier");
    const std::size_t n = team_.size();
    std::vector<std::size_t> active = everyEpisode();
    std::vector<std::string> last = turn(solver, active, "");
    std::vector<std::optional<StepResult>> score(n);  // of the latest answer, scored once
    const auto scored = [&](std::size_t i) -> const StepResult& {
      if (!score[i]) score[i] = hidden(i, last[i]);
      return *score[i];
    };
    std::vector<int> judged(n, 0), right(n, 0);
    for (auto& t : team_) t.rounds = 1;
    for (int round = 1; round < wf_.max_rounds && !active.empty(); ++round) {
      for (auto i : active) states_[i].team_context = states_[i].solution = last[i];
      const auto verdicts = turn(verifier, active, wf_.roles[verifier].context);
      std::vector<std::size_t> retry;
      for (std::size_t a = 0; a < active.size(); ++a) {
        const std::size_t i = active[a];
        const std::optional<bool> approve = parseVerdict(verdicts[a]);
        ++judged[i];
        if (approve && *approve == (scored(i).reward >= 1.0)) ++right[i];
        if (approve && !*approve) {
          states_[i].team_context = verdicts[a];
          retry.push_back(i);
        }
      }
      std::vector<std::size_t> next;
      if (!retry.empty()) {
        const auto again = turn(solver, retry, wf_.followup);
        for (std::size_t a = 0; a < retry.size(); ++a) {
          const std::size_t i = retry[a];
          ++team_[i].rounds;
          // A retry with nothing whole in it (cut at the token limit, no room left, non-finite
          // logits) leaves the earlier answer standing, and the work ends there.
          const Episode& e = team_[i].roles[solver];
          if (again[a].empty() || e.truncated || e.nonfinite) continue;
          last[i] = again[a];
          score[i].reset();
          next.push_back(i);
        }
      }
      active = std::move(next);
    }
    for (std::size_t i = 0; i < n; ++i) {
      const StepResult s = scored(i);
      setRewards(i, s.reward, s.reward, s.reason);
      if (wf_.roles[verifier].reward == RoleReward::VerdictCorrect)
        team_[i].roles[verifier].reward = judged[i] ? static_cast<double>(right[i]) / judged[i] : 0.0;
    }
  }

  void runSelector() {
    const std::size_t solver = role("solver"), selector = role("selector");
    const std::size_t n = team_.size();
    const std::vector<std::size_t> all = everyEpisode();
    std::vector<std::vector<StepResult>> scores(n);
    for (int c = 0; c < wf_.candidates; ++c) {
      const auto answers = turn(solver, all, wf_.followup);
      for (std::size_t i = 0; i < n; ++i) {
        ++team_[i].rounds;
        states_[i].candidates.push_back(extractCode(answers[i]).value_or(answers[i]));
        scores[i].push_back(hidden(i, answers[i]));
      }
    }
    const auto picks = turn(selector, all, "");
    for (std::size_t i = 0; i < n; ++i) {
      const int pick = parseFinalPick(picks[i]);
      double own = 0;
      for (const auto& s : scores[i]) own += s.reward;
      own /= static_cast<double>(scores[i].size());
      if (pick < 0 || pick >= static_cast<int>(scores[i].size())) {
        setRewards(i, 0.0, own, "no_answer");  // no pick: nothing was submitted
      } else {
        const StepResult& s = scores[i][static_cast<std::size_t>(pick)];
        setRewards(i, s.reward, own, s.reason);
      }
    }
  }

  const WorkflowSection& wf_;
  const PolicyGenerate& generate_;
  const Tokenizer& tok_;
  const ChatTemplate& chat_;
  ChatOptions chat_options_;
  SamplingOptions sampling_;
  CodeRewardOptions code_options_;
  std::vector<std::unique_ptr<Environment>> envs_;  // one per episode, reset to its row
  std::vector<TeamEpisode> team_;
  std::vector<TeamState> states_;
};

}  // namespace

std::string withoutFormatSuffix(const std::string& problem) {
  // The answer-format requests math datasets end their prompts with (DAPO's, and the common
  // "\boxed{}" line): the team's prompts say where the answer goes.
  static const char* const kSuffixes[] = {
      "Let's think step by step and output the final answer within \\boxed{}.",
      "Let's think step by step. Please put your final answer within \\boxed{}.",
      "Please put your final answer within \\boxed{}.",
  };
  std::string_view text = problem;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  for (const char* suffix : kSuffixes) {
    const std::string_view s(suffix);
    if (text.size() >= s.size() && text.substr(text.size() - s.size()) == s) {
      text.remove_suffix(s.size());
      while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
      break;
    }
  }
  return std::string(text);
}

std::optional<bool> parseVerdict(std::string_view text) {
  // The last <verify>approve</verify> or <verify>reject</verify>, spaces and case aside; without
  // one, a bare "approve" or "reject" when only one of the two words appears.
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  std::optional<bool> verdict;
  for (std::size_t at = lower.find("<verify>"); at != std::string::npos; at = lower.find("<verify>", at + 1)) {
    std::size_t k = at + 8;
    while (k < lower.size() && std::isspace(static_cast<unsigned char>(lower[k]))) ++k;
    const bool approve = lower.compare(k, 7, "approve") == 0;
    if (!approve && lower.compare(k, 6, "reject") != 0) continue;
    k += approve ? 7 : 6;
    while (k < lower.size() && std::isspace(static_cast<unsigned char>(lower[k]))) ++k;
    if (lower.compare(k, 9, "</verify>") == 0) verdict = approve;
  }
  if (verdict) return verdict;
  // A word of its own, inflected or not ("approved", "rejects"): "disapprove" is not "approve".
  const auto hasWord = [&lower](std::string_view word) {
    for (std::size_t at = lower.find(word); at != std::string::npos; at = lower.find(word, at + 1)) {
      if (at > 0 && std::isalpha(static_cast<unsigned char>(lower[at - 1]))) continue;
      std::size_t end = at + word.size();
      for (const std::string_view suffix : {"ed", "d", "s"})
        if (lower.compare(end, suffix.size(), suffix) == 0) {
          end += suffix.size();
          break;
        }
      if (end == lower.size() || !std::isalpha(static_cast<unsigned char>(lower[end]))) return true;
    }
    return false;
  };
  const bool has_approve = hasWord("approve"), has_reject = hasWord("reject");
  if (has_approve != has_reject) return has_approve;
  return std::nullopt;
}

int parseFinalPick(std::string_view text) {
  const std::size_t a = text.rfind("<final>A</final>"), b = text.rfind("<final>B</final>");
  if (a == std::string_view::npos && b == std::string_view::npos) return -1;
  if (b == std::string_view::npos) return 0;
  if (a == std::string_view::npos) return 1;
  return a > b ? 0 : 1;
}

namespace {

// A wrong version of a worked solution: its boxed answer moved by 1–10 when it is an integer,
// else with "+1" appended inside the box (or a box of its own when the solution has none).
std::string wrongSolution(const std::string& solution, const std::string& answer, std::mt19937_64& rng) {
  std::string wrong = answer + "+1";
  char* end = nullptr;
  const long long value = answer.empty() ? 0 : std::strtoll(answer.c_str(), &end, 10);
  if (!answer.empty() && end != nullptr && *end == '\0') {
    long long offset = static_cast<long long>(rng() % 10) + 1;
    if (rng() & 1) offset = -offset;
    wrong = std::to_string(value + offset);
  }
  const std::string box = "\\boxed{" + answer + "}";
  const auto at = solution.rfind(box);
  if (at == std::string::npos) return "\\boxed{" + wrong + "}";
  return solution.substr(0, at) + "\\boxed{" + wrong + "}" + solution.substr(at + box.size());
}

}  // namespace

RoleExample chatRoleExample(const WorkflowSection& wf, std::size_t role, const Tokenizer& tok,
                            const EnvironmentOptions& env_options, std::uint64_t problem_id, std::mt19937_64& rng) {
  if (wf.kind != WorkflowKind::SolverVerifier)
    throw Error(
        fmt::format("warm-start SFT of workflow {} is not built (its roles have no reference outputs); start "
                    "each policy from a model folder (policies[i].model.hf) and run `astraflow run` directly",
                    wf.kindName()));
  auto env = makeEnvironment(env_options);
  env->reset(problem_id);
  TeamState state;
  state.problem = env->problemText().value_or("");
  state.task_description = withoutFormatSuffix(state.problem);
  const std::string solution = env->referenceActions().at(0);
  RoleExample ex;
  ex.prompt.problem_id = problem_id;
  ex.ends_turn = true;
  const auto& w = wf.roles.at(role);
  if (w.role == TeamRole::Solver) {
    ex.reference = solution;
  } else if (w.role == TeamRole::Verifier) {
    const bool good = rng() & 1;
    state.team_context = state.solution =
        good ? solution : wrongSolution(solution, env->referenceAnswer(problem_id), rng);
    ex.reference = good ? "<verify>approve</verify>" : "<verify>reject</verify>";
  } else {
    throw Error(fmt::format("workflow {}: no reference for role '{}'", wf.kindName(), w.name));
  }
  // The role's first turn as the team opens it (ChatTeams::turn): its system and user messages
  // in the policy's chat template, the generation prompt after them.
  json messages = json::array();
  if (!w.system.empty()) messages.push_back({{"role", "system"}, {"content", render(w.system, state)}});
  messages.push_back({{"role", "user"}, {"content", render(w.context, state)}});
  ChatOptions open;
  open.add_generation_prompt = true;
  if (!env_options.dataset.enable_thinking.empty())
    open.extra["enable_thinking"] = env_options.dataset.enable_thinking == "true";
  appendContext(ex.prompt, tok, chatTemplateOf(env_options.dataset.tokenizer_folders.at(0)).render(messages, open));
  return ex;
}

std::vector<TeamEpisode> runCodeTeamEpisodes(const WorkflowSection& workflow, const PolicyGenerate& generate,
                                             const Tokenizer& tokenizer, const EnvironmentOptions& env_options,
                                             const std::vector<std::uint64_t>& problem_ids,
                                             const SamplingOptions& sampling) {
  return ChatTeams(workflow, generate, tokenizer, env_options, problem_ids, sampling).run();
}

}  // namespace astraflow::detail
