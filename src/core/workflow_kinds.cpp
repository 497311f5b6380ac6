// The multi-agent workflows' table (workflow_kinds.hpp): roles, order, rewards and default
// prompts of solver_verifier (on arithmetic, or chat-formatted on a text dataset), solver_selector
// and solver_testgen.
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

// The math Solver + Verifier's prompts: the paper's (Appendix A.9, as its authors' repository
// Infini-AI-Lab/astraflow writes them, Apache-2.0), so that Table 2 runs with its own prompts.
// Both open with the task and the teammates' outputs, then say the role.
const char* const kMathTeamIntro =
    "# Task Introduction\nYou are a member of an expert multi-agent team tasked with solving the math problem. "
    "The team's math problem is:\n{task_description}\n# Your Teammates' Outputs\n{team_context}\n# Your Role\n";
const char* const kMathSolver =
    "You are a \"Solver Agent\". Your job is to carefully reason through the math problem step by step and derive "
    "the correct answer. When reasoning, consider your teammates' outputs if available. Put the final answer in "
    "\\boxed{}.";
const char* const kMathVerifier =
    "You are a \"Verifier Agent\". Your responsibility is to critically review the most recent solution provided by "
    "the \"Solver Agent\". First, carefully examine each reasoning step, formula, and conclusion for accuracy, "
    "completeness, and logical consistency. Explain your analysis in detail. After completing your analysis, at the "
    "very end of your output, you MUST provide your final verdict within <verify> </verify> using exactly one of:\n"
    "(1) <verify>approve</verify> if all steps and the final answer are correct.\n(2) <verify>reject</verify> if "
    "you detect any issue.\n\nImportant: Do NOT output your verdict until you have finished your full analysis.";

}  // namespace

const std::map<WorkflowKind, KindSpec>& workflowKinds() {
  static const std::map<WorkflowKind, KindSpec> k = {
      {WorkflowKind::SolverVerifier,
       {{"solver", "verifier"},
        {{"solver", {"team_correct", "own_correct"}}, {"verifier", {"verdict_correct", "team_correct"}}},
        {{"solver", "{feedback}{problem}"}, {"verifier", "{problem}{solution}<verifier>"}},
        true,
        true,
        false,
        true,
        {{"solver", std::string(kMathTeamIntro) + kMathSolver},
         {"verifier", std::string(kMathTeamIntro) + kMathVerifier}},
        {},
        std::string(kMathTeamIntro) + kMathSolver}},
      {WorkflowKind::SolverSelector,
       {{"solver", "selector"},
        {{"solver", {"team_correct", "own_correct"}}, {"selector", {"team_correct"}}},
        {{"solver", "{problem}"}, {"selector", "{problem}{candidates}<selector>"}},
        false,
        true,
        true,
        false,
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
        false,
        {{"solver", kCodeSolver}, {"generator", kGeneratorUser}},
        {{"generator", kGeneratorSystem}},
        kCodeRetry}},
  };
  return k;
}

const std::vector<std::string>& templatePlaceholders() {
  static const std::vector<std::string> names = {"problem",     "solution",    "feedback",         "candidates",
                                                 "candidate_a", "candidate_b", "task_description", "team_context"};
  return names;
}

}  // namespace astraflow::detail
