// The multi-agent workflows' table (workflow_kinds.hpp): roles, order, rewards and default
// prompts of solver_verifier, solver_selector and solver_testgen.
#include "core/workflow_kinds.hpp"

namespace astraflow::detail {

namespace {

// The code workflows' default prompts (docs/multi-policy.md): in our own words, giving each role
// the inputs and output format of the paper's Appendix A.9.
const char* const kCodeSolver =
    "Solve this programming problem in Python 3. The program reads its input from standard input and prints "
    "the answer to standard output. Reply with one final ```python code block holding the whole program.\n\n"
    "Problem:\n{problem}";
const char* const kCodeRetry =
    "Your program failed a test case.\n{feedback}\nFix it and reply with the whole corrected program in one "
    "```python code block.";
const char* const kCodeSecond =
    "Write a second, different solution to the same problem, again as one ```python code block.";
const char* const kGeneratorSystem =
    "You write test cases for programming problems. The tests follow the problem statement, not the candidate "
    "program, and aim at the inputs it is most likely to get wrong. Think inside <analysis></analysis>, then end "
    "with exactly one ```json code block and nothing after it.";
const char* const kGeneratorUser =
    "Problem:\n{problem}\n\nCandidate program:\n```python\n{solution}\n```\n\nWrite 3 test cases as a JSON "
    "list of objects {\"input\": <the program's standard input>, \"output\": <its expected standard output>}.";
const char* const kSelectorSystem =
    "You choose between two candidate programs for a programming problem. Check each against the statement: "
    "the algorithm, edge cases, off-by-one errors, the input and output format. Think inside "
    "<analysis></analysis>, then end with <final>A</final> or <final>B</final> on its own line.";
const char* const kSelectorUser =
    "Problem:\n{problem}\n\nCandidate A:\n```python\n{candidate_a}\n```\n\nCandidate B:\n```python\n"
    "{candidate_b}\n```\n\nWhich candidate is more likely correct? If both or neither are, pick the one you "
    "trust more.";

}  // namespace

const std::map<WorkflowKind, KindSpec>& workflowKinds() {
  static const std::map<WorkflowKind, KindSpec> k = {
      {WorkflowKind::SolverVerifier,
       {{"solver", "verifier"},
        {{"solver", {"team_correct", "own_correct"}}, {"verifier", {"verdict_correct", "team_correct"}}},
        {{"solver", "{feedback}{problem}"}, {"verifier", "{problem}{solution}<verifier>"}},
        true,
        true,
        false}},
      {WorkflowKind::SolverSelector,
       {{"solver", "selector"},
        {{"solver", {"team_correct", "own_correct"}}, {"selector", {"team_correct"}}},
        {{"solver", "{problem}"}, {"selector", "{problem}{candidates}<selector>"}},
        false,
        true,
        true,
        {{"solver", kCodeSolver}, {"selector", kSelectorUser}},
        {{"selector", kSelectorSystem}},
        kCodeSecond}},
      {WorkflowKind::SolverTestgen,
       {{"solver", "generator"},
        {{"solver", {"team_correct"}}, {"generator", {"team_correct"}}},
        {},
        true,
        false,
        true,
        {{"solver", kCodeSolver}, {"generator", kGeneratorUser}},
        {{"generator", kGeneratorSystem}},
        kCodeRetry}},
  };
  return k;
}

const std::vector<std::string>& templatePlaceholders() {
  static const std::vector<std::string> names = {"problem",    "solution",    "feedback",
                                                 "candidates", "candidate_a", "candidate_b"};
  return names;
}

}  // namespace astraflow::detail
