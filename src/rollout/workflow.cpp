// Team episodes of the multi-agent workflows (include/astraflow/rollout/workflow.hpp).
#include "astraflow/rollout/workflow.hpp"

#include <fmt/format.h>

#include <memory>
#include <stdexcept>

#include "rollout/code_workflow.hpp"
#include "rollout/workflow_text.hpp"

namespace astraflow {

namespace {

using detail::appendContext;
using detail::appendTurn;
using detail::render;
using detail::TeamState;

enum class Verdict { Approve, Reject, Missing };

Episode startTranscript(const Tokenizer& tok, std::uint64_t problem_id) {
  Episode e;
  e.problem_id = problem_id;
  e.tokens.push_back(tok.bosId());
  e.behav_logprobs.push_back(0.0f);
  e.policy_mask.push_back(0);
  return e;
}

// Scores one answer text against the problem (the environment's reward).
double score(const EnvironmentOptions& env_options, std::uint64_t problem_id, const std::string& answer) {
  auto env = makeEnvironment(env_options);
  env->reset(problem_id);
  return env->step(answer).reward;
}

Verdict parseVerdict(const std::string& text) {
  const auto a = text.find("<approve>");
  const auto r = text.find("<reject>");
  if (a == std::string::npos && r == std::string::npos) return Verdict::Missing;
  return a < r ? Verdict::Approve : Verdict::Reject;
}

// The last character before "</answer>" (or the end): 'a' → 0, 'b' → 1, anything else → -1.
int parsePick(const std::string& text) {
  const std::string body = text.substr(0, text.find("</answer>"));
  const auto last = body.find_last_not_of(' ');
  if (last == std::string::npos) return -1;
  if (body[last] == 'a') return 0;
  if (body[last] == 'b') return 1;
  return -1;
}

std::size_t roleIndex(const WorkflowSection& wf, const std::string& name) {
  for (std::size_t i = 0; i < wf.roles.size(); ++i) {
    if (wf.roles[i].name == name) return i;
  }
  throw std::invalid_argument(fmt::format("workflow {} has no role '{}'", wf.kindName(), name));
}

// One turn of one role for the episodes in `active`: render the context, generate in one
// batch, append the tokens. Returns the generated text per active episode ("" when the
// transcript had no room left or the logits were not finite; the episode is then marked).
std::vector<std::string> roleTurn(const WorkflowSection& wf, std::size_t role, const PolicyGenerate& generate,
                                  const Tokenizer& tok, std::vector<TeamEpisode>& team,
                                  const std::vector<std::size_t>& active, const std::vector<TeamState>& states,
                                  const SamplingOptions& sampling) {
  SamplingOptions opts = sampling;
  opts.stop_token_ids = roleStopIds(wf, role, tok);
  std::vector<std::vector<std::int32_t>> prompts;
  for (auto i : active) {
    Episode& e = team[i].roles[role];
    appendContext(e, tok, render(wf.roles[role].context, states[i]));
    prompts.push_back(e.tokens);
  }
  auto gens = generate(wf.roles[role].policy, prompts, opts);
  std::vector<std::string> texts(active.size());
  for (std::size_t a = 0; a < active.size(); ++a) {
    Episode& e = team[active[a]].roles[role];
    const Generation& g = gens[a];
    if (!appendTurn(e, g)) continue;
    if (!g.stopped) e.truncated = true;
    texts[a] = tok.decode(g.tokens);
  }
  return texts;
}

void runSolverVerifier(const WorkflowSection& wf, const PolicyGenerate& generate, const Tokenizer& tok,
                       const EnvironmentOptions& env_options, std::vector<TeamEpisode>& team,
                       std::vector<TeamState>& states, const SamplingOptions& sampling) {
  const std::size_t solver = roleIndex(wf, "solver"), verifier = roleIndex(wf, "verifier");
  const std::size_t n = team.size();
  // correct: the latest answer; first: the first answer; final: the team's answer (the approved
  // one, else the first — a rejection can only replace an answer with an approved one).
  std::vector<double> correct(n, 0.0), first(n, 0.0), final_answer(n, 0.0), verdicts_right(n, 0.0);
  std::vector<int> verdicts(n, 0);
  std::vector<bool> done(n, false), approved(n, false);
  for (int round = 0; round < wf.max_rounds; ++round) {
    std::vector<std::size_t> active;
    for (std::size_t i = 0; i < n; ++i) {
      if (!done[i]) active.push_back(i);
    }
    if (active.empty()) break;
    auto answers = roleTurn(wf, solver, generate, tok, team, active, states, sampling);
    std::vector<std::size_t> judged;
    for (std::size_t a = 0; a < active.size(); ++a) {
      const std::size_t i = active[a];
      team[i].rounds++;
      const Episode& s = team[i].roles[solver];
      if (s.nonfinite || answers[a].empty()) {
        done[i] = true;  // no answer this round: the team's answer stays the previous one
        continue;
      }
      states[i].solution = answers[a];
      correct[i] = score(env_options, team[i].problem_id, answers[a]);
      if (round == 0) first[i] = correct[i];
      judged.push_back(i);
    }
    if (judged.empty()) break;
    auto texts = roleTurn(wf, verifier, generate, tok, team, judged, states, sampling);
    for (std::size_t a = 0; a < judged.size(); ++a) {
      const std::size_t i = judged[a];
      const Verdict v = parseVerdict(texts[a]);
      ++verdicts[i];
      if ((v == Verdict::Approve && correct[i] > 0.5) || (v == Verdict::Reject && correct[i] <= 0.5)) {
        verdicts_right[i] += 1.0;
      }
      states[i].feedback = v == Verdict::Approve ? "<approve>" : "<reject>";
      if (v == Verdict::Approve) {
        approved[i] = true;
        final_answer[i] = correct[i];
      }
      if (v == Verdict::Approve || team[i].roles[verifier].nonfinite) done[i] = true;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    team[i].team_reward = approved[i] ? final_answer[i] : first[i];
    for (std::size_t r = 0; r < wf.roles.size(); ++r) {
      const RoleReward rule = wf.roles[r].reward;
      double reward = team[i].team_reward;                      // team_correct
      if (rule == RoleReward::OwnCorrect) reward = correct[i];  // the solver's last answer
      if (rule == RoleReward::VerdictCorrect) reward = verdicts[i] ? verdicts_right[i] / verdicts[i] : 0.0;
      team[i].roles[r].reward = reward;
    }
  }
}

void runSolverSelector(const WorkflowSection& wf, const PolicyGenerate& generate, const Tokenizer& tok,
                       const EnvironmentOptions& env_options, std::vector<TeamEpisode>& team,
                       std::vector<TeamState>& states, const SamplingOptions& sampling) {
  const std::size_t solver = roleIndex(wf, "solver"), selector = roleIndex(wf, "selector");
  const std::size_t n = team.size();
  std::vector<std::vector<double>> correct(n);
  std::vector<std::size_t> all;
  for (std::size_t i = 0; i < n; ++i) all.push_back(i);
  for (int c = 0; c < wf.candidates; ++c) {
    auto answers = roleTurn(wf, solver, generate, tok, team, all, states, sampling);
    for (std::size_t i = 0; i < n; ++i) {
      team[i].rounds++;
      states[i].candidates.push_back(answers[i]);
      correct[i].push_back(answers[i].empty() ? 0.0 : score(env_options, team[i].problem_id, answers[i]));
    }
  }
  auto picks = roleTurn(wf, selector, generate, tok, team, all, states, sampling);
  for (std::size_t i = 0; i < n; ++i) {
    const int pick = parsePick(picks[i]);
    team[i].team_reward = pick >= 0 && pick < static_cast<int>(correct[i].size()) ? correct[i][pick] : 0.0;
    double own = 0;
    for (double c : correct[i]) own += c;
    own /= static_cast<double>(correct[i].size());
    for (std::size_t r = 0; r < wf.roles.size(); ++r) {
      team[i].roles[r].reward = wf.roles[r].reward == RoleReward::OwnCorrect ? own : team[i].team_reward;
    }
  }
}

// A wrong answer near the right one (verifier and selector examples).
std::string wrongAnswer(const std::string& right, std::mt19937_64& rng) {
  const long long value = std::stoll(right);
  long long offset = static_cast<long long>(rng() % 10) + 1;
  if (rng() & 1) offset = -offset;
  return std::to_string(value + offset) + "</answer>";
}

}  // namespace

std::vector<std::int32_t> roleStopIds(const WorkflowSection& wf, std::size_t role, const Tokenizer& tok) {
  std::vector<std::int32_t> ids{tok.eosId()};
  std::vector<std::string> tags = {"</answer>"};
  if (wf.roles.at(role).role == TeamRole::Verifier) tags = {"</answer>", "<approve>", "<reject>"};
  for (const auto& t : tags) {
    if (auto id = tok.tokenId(t)) ids.push_back(*id);
  }
  return ids;
}

std::vector<TeamEpisode> runTeamEpisodes(const WorkflowSection& wf, const PolicyGenerate& generate,
                                         const Tokenizer& tok, const EnvironmentOptions& env_options,
                                         const std::vector<std::uint64_t>& problem_ids,
                                         const SamplingOptions& sampling) {
  if (wf.chat) return detail::runCodeTeamEpisodes(wf, generate, tok, env_options, problem_ids, sampling);
  std::vector<TeamEpisode> team(problem_ids.size());
  std::vector<TeamState> states(problem_ids.size());
  for (std::size_t i = 0; i < problem_ids.size(); ++i) {
    team[i].problem_id = problem_ids[i];
    for (std::size_t r = 0; r < wf.roles.size(); ++r) team[i].roles.push_back(startTranscript(tok, problem_ids[i]));
    auto env = makeEnvironment(env_options);
    states[i].problem = env->reset(problem_ids[i]);
  }
  if (team.empty()) return team;
  if (wf.kind == WorkflowKind::SolverVerifier) {
    runSolverVerifier(wf, generate, tok, env_options, team, states, sampling);
  } else if (wf.kind == WorkflowKind::SolverSelector) {
    runSolverSelector(wf, generate, tok, env_options, team, states, sampling);
  } else {
    throw std::invalid_argument(fmt::format("workflow.kind '{}' has no team episodes", wf.kindName()));
  }
  // A role that never got a turn (the team stopped first) has nothing to train on.
  for (auto& t : team) {
    for (auto& e : t.roles) {
      if (e.turns == 0) e.truncated = true;
    }
  }
  return team;
}

RoleExample roleExample(const WorkflowSection& wf, std::size_t role, const Tokenizer& tok,
                        const EnvironmentOptions& env_options, std::uint64_t problem_id, std::mt19937_64& rng) {
  if (wf.chat) return detail::chatRoleExample(wf, role, tok, env_options, problem_id, rng);
  auto env = makeEnvironment(env_options);
  TeamState state;
  state.problem = env->reset(problem_id);
  const std::string right = env->referenceActions().at(0);
  const std::string right_value = right.substr(0, right.find("</answer>"));
  RoleExample ex;
  ex.prompt = startTranscript(tok, problem_id);
  const TeamRole name = wf.roles.at(role).role;
  if (name == TeamRole::Solver) {
    ex.reference = right;
  } else if (name == TeamRole::Verifier) {
    // A judge works the problem out, then compares: "46<reject>".
    const bool good = rng() & 1;
    state.solution = good ? right : wrongAnswer(right_value, rng);
    ex.reference = right_value + (good ? "<approve>" : "<reject>");
  } else if (name == TeamRole::Selector) {
    const bool first = rng() & 1;
    const std::string wrong = wrongAnswer(right_value, rng);
    state.candidates = first ? std::vector<std::string>{right, wrong} : std::vector<std::string>{wrong, right};
    ex.reference = right_value + (first ? "a</answer>" : "b</answer>");
  } else {
    throw std::invalid_argument(
        fmt::format("workflow {}: no reference for role '{}'", wf.kindName(), wf.roles[role].name));
  }
  appendContext(ex.prompt, tok, render(wf.roles[role].context, state));
  return ex;
}

bool sameDecision(const WorkflowSection& wf, std::size_t role, const std::string& output,
                  const std::string& reference) {
  const TeamRole name = wf.roles.at(role).role;
  if (wf.chat && name == TeamRole::Verifier) {
    const auto verdict = detail::parseVerdict(output);
    return verdict && verdict == detail::parseVerdict(reference);
  }
  if (name == TeamRole::Verifier)
    return parseVerdict(output) != Verdict::Missing && parseVerdict(output) == parseVerdict(reference);
  if (name == TeamRole::Selector) return parsePick(output) >= 0 && parsePick(output) == parsePick(reference);
  return output == reference;
}

Episode roleReferenceEpisode(const RoleExample& example, const Tokenizer& tok) {
  Episode e = example.prompt;
  for (auto id : tok.encode(example.reference)) {
    e.tokens.push_back(id);
    e.behav_logprobs.push_back(0.0f);
    e.policy_mask.push_back(1);
  }
  if (example.ends_turn) {
    e.tokens.push_back(tok.eosId());
    e.behav_logprobs.push_back(0.0f);
    e.policy_mask.push_back(1);
  }
  e.turns = 1;
  e.reward = 1.0;
  return e;
}

}  // namespace astraflow
