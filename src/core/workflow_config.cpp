// The `workflow` section (docs/multi-policy.md): which roles an episode has, the policy each
// role runs on, their order, the team-context template each role sees and each role's reward
// rule. Checked against `policies`, `layout`, `environment` and `dataflow.router`, so a
// workflow that could not run is refused before any rank starts.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

#include "astraflow/core/config.hpp"
#include "core/workflow_config.hpp"

namespace astraflow {

using detail::YamlReader;

const WorkflowRole* WorkflowSection::findRole(const std::string& name) const {
  for (const auto& r : roles) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::vector<std::string> WorkflowSection::policies() const {
  std::vector<std::string> out;
  for (const auto& r : roles) {
    if (std::find(out.begin(), out.end(), r.policy) == out.end()) out.push_back(r.policy);
  }
  return out;
}

namespace {

struct KindSpec {
  std::vector<std::string> roles;                           // in the only order the kind runs them
  std::map<std::string, std::vector<std::string>> rewards;  // allowed rules per role, default first
  std::map<std::string, std::string> context;               // default templates (arithmetic)
  bool loops;                                               // needs a turn limit
  bool arithmetic;                                          // runs on the arithmetic environment
  bool code;                                                // runs chat-formatted on a code dataset
  // The code workflows' defaults: each role's user message and system message, the solver's follow-up.
  std::map<std::string, std::string> chat_context = {}, chat_system = {};
  std::string chat_followup = {};
};

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

const std::map<WorkflowKind, KindSpec>& kinds() {
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

const std::vector<std::string> kPlaceholders = {"problem",    "solution",    "feedback",
                                                "candidates", "candidate_a", "candidate_b"};

// Every {name} in the template (a name of lower-case letters and '_'; other braces, as JSON in a
// prompt, are text) must be a known placeholder.
void checkTemplate(YamlReader& r, int line, const std::string& key_path, const std::string& text) {
  for (std::size_t i = text.find('{'); i != std::string::npos; i = text.find('{', i + 1)) {
    const auto close = text.find('}', i);
    if (close == std::string::npos || close == i + 1) continue;
    const std::string name = text.substr(i + 1, close - i - 1);
    if (name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") != std::string::npos) continue;
    if (std::find(kPlaceholders.begin(), kPlaceholders.end(), name) == kPlaceholders.end()) {
      r.failAt(line, key_path,
               fmt::format("unknown placeholder {{{}}} in '{}'; allowed: {{{}}}", name, text,
                           fmt::join(kPlaceholders, "} {")));
    }
  }
}

// A mapping role → scalar; keys must be roles of the workflow.
std::map<std::string, std::pair<std::string, int>> roleMap(YamlReader& r, const std::string& key,
                                                           const std::vector<std::string>& roles) {
  std::map<std::string, std::pair<std::string, int>> out;
  const auto node = r.raw(key);
  if (!node) return out;
  if (!node->IsMap()) r.fail(key, "given " + detail::describe(*node) + "; allowed: a mapping role: value");
  for (const auto& kv : *node) {
    const std::string role = kv.first.as<std::string>();
    const int line = kv.first.Mark().line + 1;
    const std::string path = r.keyPath(key) + "." + role;
    if (std::find(roles.begin(), roles.end(), role) == roles.end()) {
      r.failAt(line, path,
               fmt::format("'{}' is not a role of this workflow; allowed: {}", role, fmt::join(roles, ", ")));
    }
    if (!kv.second.IsScalar())
      r.failAt(line, path, "given " + detail::describe(kv.second) + "; allowed: a name or text");
    out[role] = {kv.second.Scalar(), line};
  }
  return out;
}

using RoleMap = std::map<std::string, std::pair<std::string, int>>;  // role -> value and its line

// The kind runs on the arithmetic environment, or chat-formatted over a code dataset.
void checkEnvironment(YamlReader& r, WorkflowSection& wf, const KindSpec& spec, const EnvironmentOptions& env) {
  wf.chat = spec.code && env.name == "dataset" && env.reward.kind == RewardKind::Code;
  if (wf.chat || (spec.arithmetic && env.name == "arithmetic")) return;
  std::vector<std::string> allowed;
  if (spec.arithmetic) allowed.push_back("environment.name: arithmetic");
  if (spec.code) allowed.push_back("environment.name: dataset with environment.reward.kind: code");
  r.fail("kind", fmt::format("the {} workflow needs {}; environment.name is '{}'{}", wf.kindName(),
                             fmt::join(allowed, ", or "), env.name,
                             env.name == "dataset"
                                 ? fmt::format(" with reward.kind '{}'", enumName(kRewardKindNames, env.reward.kind))
                                 : ""));
}

// order: the turn order; the kind fixes what comes first (the solver answers before anyone can
// judge or pick), so a given order must be the kind's.
std::vector<std::string> parseOrder(YamlReader& r, const std::string& kind, const KindSpec& spec,
                                    const RoleMap& roles) {
  if (!r.has("order")) return spec.roles;
  const std::vector<std::string> order = r.requireStringList("order");
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (!roles.count(order[i])) {
      r.failAt(r.lineOf("order"), fmt::format("{}[{}]", r.keyPath("order"), i),
               fmt::format("'{}' is not a role of this workflow; allowed: {}", order[i], fmt::join(spec.roles, ", ")));
    }
  }
  if (order != spec.roles) {
    r.fail("order", fmt::format("given [{}]; allowed: [{}] (the {} workflow runs its roles in this order, each once "
                                "per round)",
                                fmt::join(order, ", "), fmt::join(spec.roles, ", "), kind));
  }
  return order;
}

// The per-role texts and rewards a config may override, each checked where it was given.
struct RoleOverrides {
  RoleMap roles, context, system, rewards;
};

// One role of the workflow: its policy (defined, and serving no other role), its texts (the
// kind's, or the config's) and its reward (one the role allows).
WorkflowRole makeRole(YamlReader& r, const Config& cfg, const WorkflowSection& wf, const KindSpec& spec,
                      const std::string& role, const RoleOverrides& given, std::set<std::string>& used_policies) {
  WorkflowRole out;
  out.name = role;
  out.role = *enumByName(kTeamRoleNames, role);  // the kinds' roles are the enum's names
  const auto& [policy, line] = given.roles.at(role);
  out.policy = policy;
  if (!cfg.findPolicy(policy)) {
    std::vector<std::string> names;
    for (const auto& p : cfg.policies) names.push_back(p.name);
    r.failAt(line, r.keyPath("roles") + "." + role,
             fmt::format("'{}' is not a defined policy; allowed: {}", policy, fmt::join(names, ", ")));
  }
  if (!used_policies.insert(policy).second) {
    r.failAt(line, r.keyPath("roles") + "." + role,
             fmt::format("policy '{}' already serves another role; allowed: one policy per role (each role's "
                         "trajectories form its own policy's GRPO groups)",
                         policy));
  }
  out.context = wf.chat ? spec.chat_context.at(role) : spec.context.at(role);
  if (wf.chat && spec.chat_system.count(role)) out.system = spec.chat_system.at(role);
  if (auto it = given.system.find(role); it != given.system.end()) {
    out.system = it->second.first;
    checkTemplate(r, it->second.second, r.keyPath("system") + "." + role, out.system);
  }
  if (auto it = given.context.find(role); it != given.context.end()) {
    out.context = it->second.first;
    checkTemplate(r, it->second.second, r.keyPath("context") + "." + role, out.context);
  }
  const auto& allowed = spec.rewards.at(role);
  std::string reward = allowed.front();
  if (auto it = given.rewards.find(role); it != given.rewards.end()) {
    reward = it->second.first;
    if (std::find(allowed.begin(), allowed.end(), reward) == allowed.end()) {
      r.failAt(it->second.second, r.keyPath("rewards") + "." + role,
               fmt::format("given '{}'; allowed for the {} role: {}", reward, role, fmt::join(allowed, ", ")));
    }
  }
  out.reward = *enumByName(kRoleRewardNames, reward);  // every allowed rule is one of the enum's names
  return out;
}

// max_rounds: required by a kind that loops (a rejected answer goes back to the solver), 1 otherwise.
int parseRounds(YamlReader& r, const std::string& kind, const KindSpec& spec) {
  if (!spec.loops) return static_cast<int>(r.getInt("max_rounds", 1, 1, 1, "rounds"));
  if (!r.has("max_rounds")) {
    r.fail("max_rounds", fmt::format("missing; the {} workflow loops (a rejected answer goes back to the solver) and "
                                     "needs a turn limit; allowed: 1..16 rounds",
                                     kind));
  }
  return static_cast<int>(r.requireInt("max_rounds", 1, 16, "rounds"));
}

// Every policy plays a role, and some rollout entry serves the whole team (a team episode runs
// on one rank).
void checkTeamIsServed(const Config& cfg, const std::string& source) {
  const auto& wf = cfg.workflow;
  const auto team = wf.policies();
  for (const auto& p : cfg.policies) {
    if (std::find(team.begin(), team.end(), p.name) == team.end()) {
      throw ConfigError(
          fmt::format("{}:{}: policies: policy '{}' is used by no role of workflow {} (its trainer "
                      "would never get data); allowed: a policy of workflow.roles",
                      source, p.line, p.name, wf.kindName()));
    }
  }
  bool served = false;
  for (const auto& e : cfg.layout) {
    if (e.role != Role::Rollout) continue;
    served |= std::all_of(team.begin(), team.end(), [&](const std::string& p) {
      return std::find(e.policies.begin(), e.policies.end(), p) != e.policies.end();
    });
  }
  if (!served) {
    throw ConfigError(
        fmt::format("{}: layout: no rollout entry serves every policy of workflow {} (a team episode "
                    "runs on one rank); allowed: a {{role: rollout, policies: [{}]}}",
                    source, wf.kindName(), fmt::join(team, ", ")));
  }
}

// Each role's trajectories go to its policy's trainer unless the config chose a router; a
// by_role router's entries name roles and policies that exist.
void routeByRole(Config& cfg, const KindSpec& spec, const std::string& source) {
  const auto& wf = cfg.workflow;
  auto& router = cfg.dataflow.router;
  if (!cfg.dataflow.router_given) router = PluginSpec{"by_role", {}, "dataflow.router"};
  if (router.kind != "by_role") return;
  if (router.params.empty()) {
    for (const auto& role : wf.roles) router.params[role.name] = role.policy;
  }
  for (const auto& [role, policy] : router.params) {
    if (!wf.findRole(role)) {
      throw ConfigError(fmt::format("{}: {}.{}: '{}' is not a role of workflow {}; allowed: {}", source, router.key,
                                    role, role, wf.kindName(), fmt::join(spec.roles, ", ")));
    }
    if (!cfg.findPolicy(policy)) {
      std::vector<std::string> names;
      for (const auto& p : cfg.policies) names.push_back(p.name);
      throw ConfigError(fmt::format("{}: {}.{}: '{}' is not a defined policy; allowed: {}", source, router.key, role,
                                    policy, fmt::join(names, ", ")));
    }
  }
}

}  // namespace

void parseWorkflow(YamlReader r, Config& cfg) {
  auto& wf = cfg.workflow;
  wf.kind = r.getEnum("kind", WorkflowKind::Single, kWorkflowKindNames);
  if (!wf.multiAgent()) {
    r.finish();
    return;
  }
  const KindSpec& spec = kinds().at(wf.kind);
  checkEnvironment(r, wf, spec, cfg.environment);
  RoleOverrides given;
  // roles: role → policy. Every role of the kind needs one.
  given.roles = roleMap(r, "roles", spec.roles);
  for (const auto& role : spec.roles) {
    if (!given.roles.count(role)) {
      r.fail("roles", fmt::format("the {} workflow needs a policy for role '{}'; e.g. roles: {{{}}}", wf.kindName(),
                                  role, fmt::format("{}: <policy>", fmt::join(spec.roles, ": <policy>, "))));
    }
  }
  const std::vector<std::string> order = parseOrder(r, wf.kindName(), spec, given.roles);
  given.context = roleMap(r, "context", spec.roles);
  if (!wf.chat && (r.has("system") || r.has("followup")))
    r.fail(r.has("system") ? "system" : "followup",
           "belongs to the code workflows (chat-formatted, over a dataset with reward.kind: code)");
  given.system = roleMap(r, "system", spec.roles);
  wf.followup = spec.chat_followup;
  if (r.has("followup")) {
    wf.followup = r.getString("followup", "");
    checkTemplate(r, r.lineOf("followup"), r.keyPath("followup"), wf.followup);
  }
  given.rewards = roleMap(r, "rewards", spec.roles);
  std::set<std::string> used_policies;
  for (const auto& role : order) wf.roles.push_back(makeRole(r, cfg, wf, spec, role, given, used_policies));
  wf.max_rounds = parseRounds(r, wf.kindName(), spec);
  wf.candidates = wf.kind == WorkflowKind::SolverSelector ? 2 : 1;
  r.finish();

  checkTeamIsServed(cfg, r.source());
  routeByRole(cfg, spec, r.source());
}

}  // namespace astraflow
