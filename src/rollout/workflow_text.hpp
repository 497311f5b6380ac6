#pragma once
// The team state a workflow's templates are rendered from, and the rendering
// (docs/multi-policy.md lists the placeholders). Private to src/rollout.
#include <stdexcept>
#include <string>
#include <vector>

#include "astraflow/rollout/episode.hpp"

namespace astraflow::detail {

struct TeamState {
  std::string problem;                  // the environment's prompt (chat workflows: the problem text)
  std::string solution;                 // the solver's latest answer (chat workflows: its program)
  std::string feedback;                 // the verifier's latest verdict, or the failed test case
  std::vector<std::string> candidates;  // the solver's candidates (solver_selector)
  std::string task_description;         // chat solver_verifier: the problem without its answer-format suffix
  std::string team_context;             // chat solver_verifier: the teammate's latest output this role sees
};

// The placeholder at `open` (a '{'): "{name}" with a name of lower-case letters and '_' only, so
// that other braces (JSON in a prompt) are text. Its name, or "" when it is none.
inline std::string placeholderAt(const std::string& tmpl, std::size_t open) {
  const auto close = tmpl.find('}', open);
  if (close == std::string::npos || close == open + 1) return "";
  for (std::size_t i = open + 1; i < close; ++i)
    if (!(tmpl[i] >= 'a' && tmpl[i] <= 'z') && tmpl[i] != '_') return "";
  return tmpl.substr(open + 1, close - open - 1);
}

// {problem} {solution} {feedback}; {candidates} as "<candidate>c1<candidate>c2"; {candidate_a} and
// {candidate_b} the first and second candidate; {task_description} and {team_context} (the paper's
// team prompts). The config checks the placeholders.
inline std::string render(const std::string& tmpl, const TeamState& s) {
  std::string out;
  for (std::size_t i = 0; i < tmpl.size();) {
    const std::string name = tmpl[i] == '{' ? placeholderAt(tmpl, i) : "";
    if (name.empty()) {
      out += tmpl[i++];
      continue;
    }
    const auto close = i + name.size() + 1;
    if (name == "problem") {
      out += s.problem;
    } else if (name == "solution") {
      out += s.solution;
    } else if (name == "feedback") {
      out += s.feedback;
    } else if (name == "candidates") {
      for (const auto& c : s.candidates) out += "<candidate>" + c;
    } else if (name == "task_description") {
      out += s.task_description.empty() ? s.problem : s.task_description;
    } else if (name == "team_context") {
      out += s.team_context;
    } else if (name == "candidate_a" || name == "candidate_b") {
      const std::size_t k = name == "candidate_a" ? 0 : 1;
      if (k < s.candidates.size()) out += s.candidates[k];
    } else {
      throw std::invalid_argument("workflow template: unknown placeholder {" + name + "}");  // config checks this
    }
    i = close + 1;
  }
  return out;
}

// `text`'s tokens as context (mask 0).
inline void appendContext(Episode& e, const Tokenizer& tok, const std::string& text) {
  for (auto id : tok.encode(text)) {
    e.tokens.push_back(id);
    e.behav_logprobs.push_back(0.0f);
    e.policy_mask.push_back(0);
  }
}

// A role's generated turn appended to its transcript (mask 1, with its behaviour log-probs);
// false, with the episode marked, when there is nothing usable (non-finite logits, no room).
inline bool appendTurn(Episode& e, const Generation& g) {
  e.turns++;
  if (g.nonfinite) {
    e.nonfinite = true;
    return false;
  }
  if (g.tokens.empty()) {
    e.truncated = true;
    return false;
  }
  for (std::size_t t = 0; t < g.tokens.size(); ++t) {
    e.tokens.push_back(g.tokens[t]);
    e.behav_logprobs.push_back(g.logprobs[t]);
    e.policy_mask.push_back(1);
  }
  return true;
}

}  // namespace astraflow::detail
