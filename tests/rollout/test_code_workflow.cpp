// The chat workflows with scripted policies. On real code (solver_testgen, solver_selector over a
// code dataset): generated tests that catch a wrong program send the failing case back to the
// solver, whose retry is scored on the row's hidden tests in the sandbox; the selector's pick is
// the team's answer. On text (solver_verifier over a math dataset, the paper's prompts): a
// rejection sends the verifier's analysis back to the solver; verdicts are scored against the
// math reward's truth. Every transcript is the chat template's conversation with the role's own
// tokens the only ones trained on; and the config keys that choose these workflows.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/rollout/workflow.hpp"
#include "astraflow/run/hf_folders.hpp"
#include "astraflow/text/chat_template.hpp"
#include "io/temp_dir.hpp"
#include "rollout/code_workflow.hpp"

using namespace astraflow;
using json = nlohmann::ordered_json;

namespace {

const std::string kWrong = "```python\na, b = map(int, input().split())\nprint(a - b)\n```";
const std::string kRight = "Fixed:\n```python\na, b = map(int, input().split())\nprint(a + b)\n```";
const std::string kCases =
    "<analysis>negatives</analysis>\n```json\n[{\"input\": \"2 3\\n\", \"output\": \"5\\n\"}]\n```";

struct CodeFixture {
  test::TempDir dir;
  Config cfg;

  explicit CodeFixture(const std::string& kind, int max_rounds = 2) {
    InitModelOptions init;
    init.model = modelPreset("tiny-qwen3");
    initModel(dir.file("m"), init);
    std::ofstream(dir.file("code.jsonl"))
        << R"({"prompt": "Read two integers and print their sum.", "tests": [{"input": "1 2\n", "output": "3\n"}, )"
        << R"({"input": "10 -4\n", "output": "6\n"}]})"
        << "\n";
    const std::string roles = kind == "solver_testgen" ? "{solver: s, generator: g}" : "{solver: s, selector: g}";
    cfg = parseConfig(fmt::format(R"(policies:
  - {{name: s, model: {{hf: {0}}}}}
  - {{name: g, model: {{hf: {0}}}}}
layout:
  - {{role: dataflow}}
  - {{role: trainer, policy: s}}
  - {{role: trainer, policy: g}}
  - {{role: rollout, policies: [s, g]}}
environment: {{name: dataset, train: [{1}], reward: {{kind: code, all_or_nothing: true}}}}
eval: {{problems: 0}}
workflow: {{kind: {2}, roles: {3}{4}}}
)",
                                  dir.file("m"), dir.file("code.jsonl"), kind, roles,
                                  kind == "solver_testgen" ? fmt::format(", max_rounds: {}", max_rounds) : ""),
                      "code.yaml");
  }
};

// A scripted policy: `answer(policy, prompt text)` is the turn's text; the generation is its
// tokens and the end-of-turn token, each with log-prob -0.5.
PolicyGenerate scripted(const Tokenizer& tok, std::function<std::string(const std::string&, const std::string&)> answer,
                        std::vector<std::string>* prompts_seen = nullptr) {
  return [&tok, answer, prompts_seen](const std::string& policy, const std::vector<std::vector<std::int32_t>>& prompts,
                                      const SamplingOptions& options) {
    std::vector<Generation> out;
    for (const auto& p : prompts) {
      const std::string text = tok.decode(p);
      if (prompts_seen) prompts_seen->push_back(text);
      Generation g;
      g.tokens = tok.encode(answer(policy, text));
      g.tokens.push_back(tok.eosId());
      EXPECT_EQ(options.stop_token_ids, std::vector<std::int32_t>{tok.eosId()});
      g.logprobs.assign(g.tokens.size(), -0.5f);
      g.stopped = true;
      out.push_back(std::move(g));
    }
    return out;
  };
}

std::size_t trained(const Episode& e) {
  return static_cast<std::size_t>(std::count(e.policy_mask.begin(), e.policy_mask.end(), 1));
}

}  // namespace

TEST(CodeWorkflow, TestgenFeedbackLeadsToARightRetry) {
  CodeFixture f("solver_testgen");
  ASSERT_TRUE(f.cfg.workflow.chat);
  const auto tok = makeEnvironmentTokenizer(f.cfg.environment);
  std::vector<std::string> seen;
  const auto generate = scripted(
      *tok,
      [](const std::string& policy, const std::string& prompt) {
        if (policy == "g") return kCases;
        return prompt.find("failed a test case") != std::string::npos ? kRight : kWrong;
      },
      &seen);
  const auto team = runTeamEpisodes(f.cfg.workflow, generate, *tok, f.cfg.environment, {0}, {});
  ASSERT_EQ(team.size(), 1u);
  const TeamEpisode& t = team[0];
  EXPECT_EQ(t.rounds, 2);
  EXPECT_EQ(t.team_reward, 1.0);
  ASSERT_EQ(t.roles.size(), 2u);
  EXPECT_EQ(t.roles[0].reward, 1.0);
  EXPECT_EQ(t.roles[1].reward, 1.0);
  EXPECT_EQ(t.roles[0].reward_reason, "correct");

  // The generator saw the problem, the candidate program and its system message.
  ASSERT_EQ(seen.size(), 3u);  // solver, generator, solver again
  EXPECT_NE(seen[1].find("You write test cases"), std::string::npos) << seen[1];
  EXPECT_NE(seen[1].find("print(a - b)"), std::string::npos) << seen[1];
  EXPECT_NE(seen[1].find("Read two integers"), std::string::npos) << seen[1];
  // The solver's transcript: its conversation, its first program, the failing case as the next
  // user message (input, expected and actual output), its retry.
  const std::string feedback = "Input:\n2 3\n\nExpected output:\n5\n\nYour program's output:\n-1\n";
  std::string retry = f.cfg.workflow.followup;
  retry.replace(retry.find("{feedback}"), 10, feedback);
  EXPECT_NE(seen[2].find(retry), std::string::npos) << seen[2];
  const ChatTemplate chat = ChatTemplate::load(f.dir.file("m"));
  const std::string tail_text =
      kWrong + "<|im_end|>" + chat.continuation({{"role", "user"}, {"content", retry}}) + kRight + "<|im_end|>";
  const Episode& solver = t.roles[0];
  const auto tail = tok->encode(tail_text);
  ASSERT_GT(solver.tokens.size(), tail.size());
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), solver.tokens.end() - static_cast<std::ptrdiff_t>(tail.size())));
  EXPECT_EQ(seen[0], tok->decode(std::vector<std::int32_t>(
                         solver.tokens.begin(), solver.tokens.end() - static_cast<std::ptrdiff_t>(tail.size()))));
  // Only the solver's own tokens (two turns, each closed by its end-of-turn token) are trained.
  EXPECT_EQ(trained(solver), tok->encode(kWrong).size() + tok->encode(kRight).size() + 2);
  EXPECT_EQ(trained(t.roles[1]), tok->encode(kCases).size() + 1);
}

TEST(CodeWorkflow, TestgenWithoutUsableTestsKeepsTheFirstProgram) {
  CodeFixture f("solver_testgen");
  const auto tok = makeEnvironmentTokenizer(f.cfg.environment);
  const auto generate = scripted(*tok, [](const std::string& policy, const std::string&) {
    return policy == "g" ? std::string("```json\nnot json\n```") : kWrong;
  });
  const auto team = runTeamEpisodes(f.cfg.workflow, generate, *tok, f.cfg.environment, {0}, {});
  EXPECT_EQ(team[0].rounds, 1);
  EXPECT_EQ(team[0].team_reward, 0.0);
  EXPECT_EQ(team[0].roles[0].reward_reason, "wrong");
  // One round allowed: no retry even when the generated tests catch the program.
  CodeFixture once("solver_testgen", 1);
  const auto generate2 =
      scripted(*tok, [](const std::string& policy, const std::string&) { return policy == "g" ? kCases : kWrong; });
  EXPECT_EQ(runTeamEpisodes(once.cfg.workflow, generate2, *tok, once.cfg.environment, {0}, {})[0].rounds, 1);
}

TEST(CodeWorkflow, SelectorPickIsTheTeamsAnswer) {
  CodeFixture f("solver_selector");
  const auto tok = makeEnvironmentTokenizer(f.cfg.environment);
  for (const auto& [pick, want] :
       std::vector<std::pair<std::string, double>>{{"<analysis>B adds</analysis>\n<final>B</final>", 1.0},
                                                   {"<final>B</final> no, <final>A</final>", 0.0},
                                                   {"both look fine", 0.0}}) {
    std::vector<std::string> seen;
    const auto generate = scripted(
        *tok,
        [&pick = pick](const std::string& policy, const std::string& prompt) {
          if (policy == "g") return pick;
          return prompt.find("second, different solution") != std::string::npos ? kRight : kWrong;
        },
        &seen);
    const auto team = runTeamEpisodes(f.cfg.workflow, generate, *tok, f.cfg.environment, {0}, {});
    EXPECT_EQ(team[0].team_reward, want) << pick;
    EXPECT_EQ(team[0].rounds, 2);
    ASSERT_EQ(seen.size(), 3u);
    // The selector sees both programs, A the first and B the second.
    EXPECT_LT(seen[2].find("print(a - b)"), seen[2].find("print(a + b)")) << seen[2];
    EXPECT_NE(seen[2].find("You choose between two candidate programs"), std::string::npos);
  }
  EXPECT_EQ(astraflow::detail::parseFinalPick("<final>A</final>"), 0);
  EXPECT_EQ(astraflow::detail::parseFinalPick("x <final>A</final> then <final>B</final>"), 1);
  EXPECT_EQ(astraflow::detail::parseFinalPick("<final>C</final>"), -1);
}

TEST(CodeWorkflow, ConfigChoosesTheChatWorkflows) {
  CodeFixture f("solver_testgen");
  const WorkflowSection& wf = f.cfg.workflow;
  EXPECT_EQ(wf.max_rounds, 2);
  EXPECT_NE(wf.followup.find("{feedback}"), std::string::npos);
  EXPECT_NE(wf.roles[1].system.find("test cases"), std::string::npos);
  const std::string base = f.cfg.text;
  auto error = [&](const std::string& from, const std::string& to) {
    std::string text = base;
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    try {
      parseConfig(text, "bad.yaml");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(error("kind: code, all_or_nothing: true", "kind: math")
                .find("the solver_testgen workflow needs environment.name: dataset with environment.reward.kind: code"),
            std::string::npos);
  EXPECT_NE(error("max_rounds: 2}", "max_rounds: 2, followup: 'retry {hint}'}").find("unknown placeholder {hint}"),
            std::string::npos);
  EXPECT_EQ(error("max_rounds: 2}", "max_rounds: 2, system: {solver: 'Be exact.'}}"), "accepted");
}

// ---- solver_verifier on text (the paper's math team) -------------------------------------------

namespace {

struct MathTeamFixture {
  test::TempDir dir;
  Config cfg;

  explicit MathTeamFixture(int max_rounds = 2, const std::string& extra = "") {
    InitModelOptions init;
    init.model = modelPreset("tiny-qwen3");
    initModel(dir.file("m"), init);
    std::ofstream(dir.file("math.jsonl"))
        << R"({"prompt": "What is 6 times 7?\nLet's think step by step and output the final answer within )"
        << R"(\\boxed{}.", "answer": "42"})"
        << "\n";
    cfg = parseConfig(fmt::format(R"(policies:
  - {{name: s, model: {{hf: {0}}}}}
  - {{name: v, model: {{hf: {0}}}}}
layout:
  - {{role: dataflow}}
  - {{role: trainer, policy: s}}
  - {{role: trainer, policy: v}}
  - {{role: rollout, policies: [s, v]}}
environment: {{name: dataset, train: [{1}], reward: {{kind: math}}}}
eval: {{problems: 0}}
workflow: {{kind: solver_verifier, roles: {{solver: s, verifier: v}}, max_rounds: {2}{3}}}
)",
                                  dir.file("m"), dir.file("math.jsonl"), max_rounds, extra),
                      "math_team.yaml");
  }
};

const std::string kReject = "6 times 7 is 42, not 41.\n<verify>reject</verify>";
const std::string kApprove = "The product is right.\n<verify>approve</verify>";

}  // namespace

TEST(TextVerifier, ARejectedAnswerGoesBackWithTheAnalysis) {
  MathTeamFixture f;
  ASSERT_TRUE(f.cfg.workflow.chat);
  const auto tok = makeEnvironmentTokenizer(f.cfg.environment);
  std::vector<std::string> seen;
  const auto generate = scripted(
      *tok,
      [](const std::string& policy, const std::string& prompt) {
        if (policy == "v") return prompt.find("\\boxed{42}") != std::string::npos ? kApprove : kReject;
        return prompt.find("not 41") != std::string::npos ? std::string("So \\boxed{42}.")
                                                          : std::string("I get \\boxed{41}.");
      },
      &seen);
  const auto team = runTeamEpisodes(f.cfg.workflow, generate, *tok, f.cfg.environment, {0}, {});
  ASSERT_EQ(team.size(), 1u);
  const TeamEpisode& t = team[0];
  EXPECT_EQ(t.rounds, 2);
  EXPECT_EQ(t.team_reward, 1.0);  // the retry is final
  EXPECT_EQ(t.roles[0].reward, 1.0);
  EXPECT_EQ(t.roles[0].reward_reason, "correct");
  EXPECT_EQ(t.roles[1].reward, 1.0);  // it rejected a wrong answer: its one verdict is right
  // Solver, verifier, solver again: max_rounds 2 is one verification, the retry unverified.
  ASSERT_EQ(seen.size(), 3u);
  // The team prompts of the paper: the problem without the dataset's format request, the role.
  EXPECT_NE(seen[0].find("The team's math problem is:\nWhat is 6 times 7?\n# Your Teammates' Outputs\n\n# Your Role"),
            std::string::npos)
      << seen[0];
  EXPECT_EQ(seen[0].find("Let's think step by step"), std::string::npos) << seen[0];
  EXPECT_NE(seen[0].find("You are a \"Solver Agent\""), std::string::npos);
  EXPECT_NE(seen[1].find("# Your Teammates' Outputs\nI get \\boxed{41}.\n# Your Role"), std::string::npos) << seen[1];
  EXPECT_NE(seen[1].find("<verify>approve</verify> if all steps"), std::string::npos);
  // The retry is the solver's prompt again with the verifier's whole output as its teammates'.
  EXPECT_NE(seen[2].find("# Your Teammates' Outputs\n" + kReject + "\n# Your Role"), std::string::npos) << seen[2];
  // The solver's transcript: its first answer and its retry trained, the prompts not.
  const Episode& solver = t.roles[0];
  EXPECT_EQ(trained(solver), tok->encode("I get \\boxed{41}.").size() + tok->encode("So \\boxed{42}.").size() + 2);
  EXPECT_EQ(trained(t.roles[1]), tok->encode(kReject).size() + 1);
}

// Warm-start SFT of the math team on text: each role's example is the very prompt the team shows
// it in an episode (here, the Solver's first turn, and the Verifier's turn after the Solver wrote
// the row's solution), the reference ends the turn with <eos>, and the Verifier sees right and
// wrong solutions with the verdict that fits each.
TEST(TextVerifier, WarmStartExamplesAreTheTeamsOwnPrompts) {
  MathTeamFixture f;
  const auto tok = makeEnvironmentTokenizer(f.cfg.environment);
  std::vector<std::string> seen;
  const auto generate = scripted(
      *tok, [](const std::string& policy, const std::string&) { return policy == "v" ? kApprove : "\\boxed{42}"; },
      &seen);
  runTeamEpisodes(f.cfg.workflow, generate, *tok, f.cfg.environment, {0}, {});
  ASSERT_EQ(seen.size(), 2u);
  std::mt19937_64 rng(7);
  const RoleExample solver = roleExample(f.cfg.workflow, 0, *tok, f.cfg.environment, 0, rng);
  EXPECT_EQ(tok->decode(solver.prompt.tokens), seen[0]);
  EXPECT_EQ(solver.reference, "\\boxed{42}");
  const Episode trained_solver = roleReferenceEpisode(solver, *tok);
  EXPECT_EQ(trained_solver.tokens.back(), tok->eosId());
  EXPECT_EQ(trained(trained_solver), tok->encode("\\boxed{42}").size() + 1);
  int approve = 0, reject = 0;
  for (int k = 0; k < 40; ++k) {
    const RoleExample v = roleExample(f.cfg.workflow, 1, *tok, f.cfg.environment, 0, rng);
    const std::string prompt = tok->decode(v.prompt.tokens);
    const auto verdict = astraflow::detail::parseVerdict(v.reference);
    ASSERT_TRUE(verdict.has_value()) << v.reference;
    if (*verdict) {
      ++approve;
      EXPECT_EQ(prompt, seen[1]);  // the solution the Solver wrote, as the team shows it
    } else {
      ++reject;
      EXPECT_EQ(prompt.find("\\boxed{42}"), std::string::npos) << prompt;
      EXPECT_NE(prompt.find("\\boxed{"), std::string::npos) << prompt;
    }
    EXPECT_TRUE(sameDecision(f.cfg.workflow, 1, v.reference, v.reference));
    EXPECT_FALSE(sameDecision(f.cfg.workflow, 1, "no verdict", v.reference));
  }
  EXPECT_GT(approve, 5);
  EXPECT_GT(reject, 5);
}

TEST(TextVerifier, VerdictsAreScoredAgainstTheTruth) {
  const auto run = [](int max_rounds, const std::string& solver_text, const std::string& verdict) {
    MathTeamFixture f(max_rounds);
    const auto tok = makeEnvironmentTokenizer(f.cfg.environment);
    const auto generate = scripted(
        *tok, [&](const std::string& policy, const std::string&) { return policy == "v" ? verdict : solver_text; });
    return runTeamEpisodes(f.cfg.workflow, generate, *tok, f.cfg.environment, {0}, {})[0];
  };
  // Approving a wrong answer: the team is wrong, the verdict too, and there is no retry.
  TeamEpisode t = run(3, "\\boxed{41}", kApprove);
  EXPECT_EQ(t.rounds, 1);
  EXPECT_EQ(t.team_reward, 0.0);
  EXPECT_EQ(t.roles[1].reward, 0.0);
  // Approving a right answer: both right.
  t = run(3, "\\boxed{42}", kApprove);
  EXPECT_EQ(t.team_reward, 1.0);
  EXPECT_EQ(t.roles[1].reward, 1.0);
  // Rejecting a right answer every round: three attempts, two verdicts both wrong; the last
  // (unverified) attempt is the team's, and it is right.
  t = run(3, "\\boxed{42}", kReject);
  EXPECT_EQ(t.rounds, 3);
  EXPECT_EQ(t.team_reward, 1.0);
  EXPECT_EQ(t.roles[1].reward, 0.0);
  // No verdict: counted wrong, and the answer stands (no retry).
  t = run(3, "\\boxed{41}", "I am not sure.");
  EXPECT_EQ(t.rounds, 1);
  EXPECT_EQ(t.roles[1].reward, 0.0);
  // One round would leave the verifier silent and its trainer starving: refused.
  try {
    MathTeamFixture once(1);
    ADD_FAILURE() << "max_rounds: 1 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("workflow.max_rounds"), std::string::npos) << e.what();
  }

  using astraflow::detail::parseVerdict;
  EXPECT_EQ(parseVerdict("<verify>approve</verify>"), true);
  EXPECT_EQ(parseVerdict("<VERIFY> Reject </verify>"), false);
  EXPECT_EQ(parseVerdict("<verify>reject</verify> ... <verify>approve</verify>"), true);  // the last
  EXPECT_EQ(parseVerdict("I approve of this."), true);                                    // the bare word
  EXPECT_EQ(parseVerdict("approve or reject?"), std::nullopt);
  EXPECT_EQ(parseVerdict("I disapprove of this solution."), std::nullopt);  // a whole word only
  EXPECT_EQ(parseVerdict("I disapprove; reject it."), false);
  EXPECT_EQ(parseVerdict("Approved."), true);  // inflected
  EXPECT_EQ(parseVerdict("Rejected: the sum is wrong."), false);
  EXPECT_EQ(parseVerdict("<verify>maybe</verify>"), std::nullopt);
  using astraflow::detail::withoutFormatSuffix;
  EXPECT_EQ(withoutFormatSuffix("Find x.\nPlease put your final answer within \\boxed{}.\n"), "Find x.");
  EXPECT_EQ(withoutFormatSuffix("Find x. Put it in a box."), "Find x. Put it in a box.");
}

TEST(TextVerifier, AnEmptyRetryLeavesTheEarlierAnswer) {
  MathTeamFixture f(3);
  const auto tok = makeEnvironmentTokenizer(f.cfg.environment);
  int solver_turns = 0;
  const PolicyGenerate generate = [&](const std::string& policy, const std::vector<std::vector<std::int32_t>>& prompts,
                                      const SamplingOptions&) {
    std::vector<Generation> out;
    for (std::size_t p = 0; p < prompts.size(); ++p) {
      Generation g;
      const bool empty_retry = policy == "s" && solver_turns++ > 0;  // no room left for the retry
      if (!empty_retry) {
        g.tokens = tok->encode(policy == "v" ? kReject : std::string("\\boxed{42}"));
        g.tokens.push_back(tok->eosId());
        g.logprobs.assign(g.tokens.size(), -0.5f);
      }
      out.push_back(std::move(g));
    }
    return out;
  };
  const TeamEpisode t = runTeamEpisodes(f.cfg.workflow, generate, *tok, f.cfg.environment, {0}, {})[0];
  EXPECT_EQ(t.rounds, 2);             // the first answer, one empty retry, and no third attempt
  EXPECT_EQ(t.team_reward, 1.0);      // the first answer stands
  EXPECT_EQ(t.roles[1].reward, 0.0);  // it rejected a right answer
}

TEST(TextVerifier, ConfigChoosesItOnTextDatasets) {
  MathTeamFixture f;
  const WorkflowSection& wf = f.cfg.workflow;
  EXPECT_TRUE(wf.chat);
  EXPECT_NE(wf.roles[0].context.find("{task_description}"), std::string::npos);
  EXPECT_NE(wf.roles[1].context.find("<verify>reject</verify>"), std::string::npos);
  EXPECT_EQ(wf.followup, wf.roles[0].context);  // the retry: the solver's prompt, the analysis as context
  // Custom prompts and a system message are the user's to give.
  MathTeamFixture custom(2, ", system: {verifier: 'Be strict.'}, followup: 'Again: {task_description} {team_context}'");
  EXPECT_EQ(custom.cfg.workflow.roles[1].system, "Be strict.");
  EXPECT_EQ(custom.cfg.workflow.followup, "Again: {task_description} {team_context}");
  // On the code reward it is not a text workflow: refused, naming what it runs on.
  std::string text = f.cfg.text;
  text.replace(text.find("kind: math"), 10, "kind: code");
  try {
    parseConfig(text, "bad.yaml");
    ADD_FAILURE() << "solver_verifier accepted a code dataset";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("dataset with a text reward"), std::string::npos) << e.what();
  }
}
