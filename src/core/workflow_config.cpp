// The `workflow` section (docs/multi-policy.md), declared as a schema: which roles an episode
// has, the policy each role runs on, their order, the team-context template each role sees and
// each role's reward rule. Checked against `policies`, `layout`, `environment` and
// `dataflow.router`, so a workflow that could not run is refused before any rank starts.
#include "core/workflow_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "astraflow/core/config.hpp"
#include "core/config_schema.hpp"
#include "core/workflow_kinds.hpp"

namespace astraflow {

using detail::KindSpec;
using detail::SectionSchema;
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

using RoleMap = std::map<std::string, std::pair<std::string, int>>;  // role -> value and its line

// What the section says, as its schema reads it, and the sections read before it that it is
// checked against (policies, layout, environment).
struct WorkflowInput {
  const Config* cfg = nullptr;
  WorkflowKind kind = WorkflowKind::Single;
  RoleMap roles, context, system, rewards;
  std::optional<std::string> followup;  // absent: the kind's
  int max_rounds = 1;

  bool multiAgent() const { return kind != WorkflowKind::Single; }
  const KindSpec& spec() const { return detail::workflowKinds().at(kind); }
  const char* kindName() const { return enumName(kWorkflowKindNames, kind); }
  // The chat workflows: the code ones over a dataset scored by the code reward, the text ones over a
  // dataset scored by any other reward (math, exact, choice, a verifier).
  bool chat() const {
    const auto& env = cfg->environment;
    if (env.name != "dataset") return false;
    return env.reward.kind == RewardKind::Code ? spec().code : spec().text;
  }
};

// Every {name} in the template (a name of lower-case letters and '_'; other braces, as JSON in a
// prompt, are text) must be a known placeholder.
void checkTemplate(const YamlReader& r, int line, const std::string& key_path, const std::string& text) {
  const auto& known = detail::templatePlaceholders();
  for (std::size_t i = text.find('{'); i != std::string::npos; i = text.find('{', i + 1)) {
    const auto close = text.find('}', i);
    if (close == std::string::npos || close == i + 1) continue;
    const std::string name = text.substr(i + 1, close - i - 1);
    if (name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") != std::string::npos) continue;
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      r.failAt(line, key_path,
               fmt::format("unknown placeholder {{{}}} in '{}'; allowed: {{{}}}", name, text, fmt::join(known, "} {")));
    }
  }
}

// A mapping role → scalar; keys must be roles of the workflow.
RoleMap roleMap(YamlReader& r, const std::string& key, const std::vector<std::string>& roles) {
  RoleMap out;
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

std::string policyNames(const Config& cfg) {
  std::vector<std::string> names;
  for (const auto& p : cfg.policies) names.push_back(p.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// order: the turn order; the kind fixes what comes first (the solver answers before anyone can
// judge or pick), so a given order must be the kind's.
void checkOrder(YamlReader& r, const WorkflowInput& in) {
  const auto& spec = in.spec();
  const std::vector<std::string> order = r.requireStringList("order");
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (std::find(spec.roles.begin(), spec.roles.end(), order[i]) == spec.roles.end()) {
      r.failAt(r.lineOf("order"), fmt::format("{}[{}]", r.keyPath("order"), i),
               fmt::format("'{}' is not a role of this workflow; allowed: {}", order[i], fmt::join(spec.roles, ", ")));
    }
  }
  if (order != spec.roles) {
    r.fail("order", fmt::format("given [{}]; allowed: [{}] (the {} workflow runs its roles in this order, each once "
                                "per round)",
                                fmt::join(order, ", "), fmt::join(spec.roles, ", "), in.kindName()));
  }
}

// Once every key is read, each role in the kind's order: its policy defined and serving no
// other role, its texts' placeholders known, its reward rule one the role allows.
void checkEachRole(YamlReader& r, const WorkflowInput& in) {
  if (!in.multiAgent()) return;
  const auto& spec = in.spec();
  std::set<std::string> used;
  for (const auto& role : spec.roles) {
    const auto& [policy, line] = in.roles.at(role);
    const std::string path = r.keyPath("roles") + "." + role;
    if (!in.cfg->findPolicy(policy))
      r.failAt(line, path, fmt::format("'{}' is not a defined policy; allowed: {}", policy, policyNames(*in.cfg)));
    if (!used.insert(policy).second) {
      r.failAt(line, path,
               fmt::format("policy '{}' already serves another role; allowed: one policy per role (each role's "
                           "trajectories form its own policy's GRPO groups)",
                           policy));
    }
    for (const auto* texts : {&in.system, &in.context}) {
      if (auto it = texts->find(role); it != texts->end())
        checkTemplate(r, it->second.second, r.keyPath(texts == &in.system ? "system" : "context") + "." + role,
                      it->second.first);
    }
    if (auto it = in.rewards.find(role); it != in.rewards.end()) {
      const auto& allowed = spec.rewards.at(role);
      if (std::find(allowed.begin(), allowed.end(), it->second.first) == allowed.end()) {
        r.failAt(
            it->second.second, r.keyPath("rewards") + "." + role,
            fmt::format("given '{}'; allowed for the {} role: {}", it->second.first, role, fmt::join(allowed, ", ")));
      }
    }
  }
}

// max_rounds: required by a kind that loops (a rejected answer goes back to the solver), 1 otherwise.
int readRounds(YamlReader& r, const WorkflowInput& in) {
  if (!in.spec().loops) return static_cast<int>(r.getInt("max_rounds", 1, 1, 1, "rounds"));
  if (!r.has("max_rounds")) {
    r.fail("max_rounds", fmt::format("missing; the {} workflow loops (a rejected answer goes back to the solver) and "
                                     "needs a turn limit; allowed: 1..16 rounds",
                                     in.kindName()));
  }
  // On text the verifier judges every attempt but the last: with one attempt it would never speak,
  // and its trainer would starve.
  const bool text_verifier = in.kind == WorkflowKind::SolverVerifier && in.chat();
  return static_cast<int>(r.requireInt("max_rounds", text_verifier ? 2 : 1, 16, "rounds"));
}

// Every policy plays a role, and some rollout entry serves the whole team (a team episode runs
// on one rank).
void checkTeamIsServed(const YamlReader& r, const WorkflowInput& in) {
  const Config& cfg = *in.cfg;
  std::vector<std::string> team;
  for (const auto& role : in.spec().roles) team.push_back(in.roles.at(role).first);
  for (const auto& p : cfg.policies) {
    if (std::find(team.begin(), team.end(), p.name) == team.end()) {
      throw ConfigError(
          fmt::format("{}:{}: policies: policy '{}' is used by no role of workflow {} (its trainer "
                      "would never get data); allowed: a policy of workflow.roles",
                      r.source(), p.line, p.name, in.kindName()));
    }
  }
  const bool served = std::any_of(cfg.layout.begin(), cfg.layout.end(), [&](const LayoutEntry& e) {
    return e.role == Role::Rollout && std::all_of(team.begin(), team.end(), [&](const std::string& p) {
             return std::find(e.policies.begin(), e.policies.end(), p) != e.policies.end();
           });
  });
  if (!served) {
    throw ConfigError(
        fmt::format("{}: layout: no rollout entry serves every policy of workflow {} (a team episode "
                    "runs on one rank); allowed: a {{role: rollout, policies: [{}]}}",
                    r.source(), in.kindName(), fmt::join(team, ", ")));
  }
}

// The kind runs on the arithmetic environment, or chat-formatted over a code or text dataset.
void checkEnvironment(const YamlReader& r, const WorkflowInput& in) {
  const auto& spec = in.spec();
  const auto& env = in.cfg->environment;
  if (in.chat() || (spec.arithmetic && env.name == "arithmetic")) return;
  std::vector<std::string> allowed;
  if (spec.arithmetic) allowed.push_back("environment.name: arithmetic");
  if (spec.code) allowed.push_back("environment.name: dataset with environment.reward.kind: code");
  if (spec.text) allowed.push_back("environment.name: dataset with a text reward (environment.reward.kind: math, ...)");
  r.fail("kind", fmt::format("the {} workflow needs {}; environment.name is '{}'{}", in.kindName(),
                             fmt::join(allowed, ", or "), env.name,
                             env.name == "dataset"
                                 ? fmt::format(" with reward.kind '{}'", enumName(kRewardKindNames, env.reward.kind))
                                 : ""));
}

// ---- the schema's doc texts, written from the kinds' table --------------------------------

// "solver_verifier: TEXT; solver_selector: TEXT; …" over the kinds whose TEXT is not empty.
std::string perKind(const std::function<std::string(const KindSpec&)>& text) {
  std::vector<std::string> parts;
  for (const auto& [kind, spec] : detail::workflowKinds()) {
    if (std::string t = text(spec); !t.empty())
      parts.push_back(fmt::format("{}: {}", enumName(kWorkflowKindNames, kind), t));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string quoted(const std::vector<std::string>& names, const char* separator) {
  std::vector<std::string> out;
  for (const auto& n : names) out.push_back("`" + n + "`");
  return fmt::format("{}", fmt::join(out, separator));
}

// "role `text`, role `text`" for each role of the kind that the map holds, in the kind's order.
std::string perRole(const KindSpec& spec, const std::function<std::string(const std::string&)>& text) {
  std::vector<std::string> parts;
  for (const auto& role : spec.roles) {
    if (std::string t = text(role); !t.empty()) parts.push_back(role + " " + t);
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string placeholdersText() {
  std::vector<std::string> names;
  for (const auto& n : detail::templatePlaceholders()) names.push_back("`{" + n + "}`");
  return fmt::format("placeholders {} (a `{{name}}` of lower-case letters and `_`; other braces are text)",
                     fmt::join(names, " "));
}

// The roles a code workflow gives a system message by default.
std::string instructionsText(const KindSpec& spec) {
  std::vector<std::string> roles;
  for (const auto& role : spec.roles)
    if (spec.chat_system.count(role)) roles.push_back("the " + role + "'s instructions");
  return fmt::format("{}", fmt::join(roles, ", "));
}

std::vector<std::string> kindsWhere(const std::function<bool(const KindSpec&)>& test) {
  std::vector<std::string> names;
  for (const auto& [kind, spec] : detail::workflowKinds())
    if (test(spec)) names.emplace_back(enumName(kWorkflowKindNames, kind));
  return names;
}

std::vector<std::string> multiAgentKinds() {
  return kindsWhere([](const KindSpec&) { return true; });
}

// A role-keyed mapping only a multi-agent workflow takes (a single one has refused it already),
// read whether or not it is given: an absent or null one is empty.
std::function<void(YamlReader&, WorkflowInput&)> teamMap(const char* key, RoleMap WorkflowInput::*member) {
  return [key, member](YamlReader& r, WorkflowInput& in) {
    if (in.multiAgent()) in.*member = roleMap(r, key, in.spec().roles);
  };
}

// A reader for a key only a multi-agent workflow takes, where it is given.
std::function<void(YamlReader&, WorkflowInput&)> teamKey(const char* key,
                                                         std::function<void(YamlReader&, WorkflowInput&)> read) {
  return [key, read = std::move(read)](YamlReader& r, WorkflowInput& in) {
    if (in.multiAgent() && r.has(key)) read(r, in);
  };
}

const SectionSchema<WorkflowInput>& workflowSchema();

// ---- the rules (each a no-op where it does not apply) -------------------------------------

// single_alone: a single workflow's other keys are refused as such, not as unknown.
void refuseTeamKeys(YamlReader& r, const WorkflowInput& in) {
  if (in.multiAgent()) return;
  for (const auto& key : workflowSchema().keyNames()) {
    if (key != "kind" && r.has(key)) {
      r.fail(key, fmt::format("belongs to a multi-agent workflow ({}); workflow.kind is 'single'",
                              fmt::join(multiAgentKinds(), ", ")));
    }
  }
}

void checkKindsEnvironment(YamlReader& r, const WorkflowInput& in) {
  if (in.multiAgent()) checkEnvironment(r, in);
}

void checkEveryRolePlayed(YamlReader& r, const WorkflowInput& in) {
  if (!in.multiAgent()) return;
  const auto& roles = in.spec().roles;
  for (const auto& role : roles) {
    if (!in.roles.count(role)) {
      r.fail("roles", fmt::format("the {} workflow needs a policy for role '{}'; e.g. roles: {{{}}}", in.kindName(),
                                  role, fmt::format("{}: <policy>", fmt::join(roles, ": <policy>, "))));
    }
  }
}

void refuseChatKeys(YamlReader& r, const WorkflowInput& in) {
  if (!in.multiAgent() || in.chat()) return;
  for (const char* key : {"system", "followup"})
    if (r.has(key))
      r.fail(key,
             "belongs to the chat workflows (over a dataset: the code workflows with reward.kind: code, "
             "solver_verifier with a text reward)");
}

void checkTeam(YamlReader& r, const WorkflowInput& in) {
  if (in.multiAgent()) checkTeamIsServed(r, in);
}

// ---- the keys' doc texts ------------------------------------------------------------------

const char* const kChatWorkflows =
    "chat workflows (over a `dataset`: the code ones with `reward.kind: code`, `solver_verifier` with a text reward)";

std::string environmentsText() {
  return "each kind runs on its environment: " + perKind([](const KindSpec& s) {
           std::vector<std::string> where;
           if (s.arithmetic) where.emplace_back("`arithmetic`");
           if (s.code) where.emplace_back("a `dataset` with `reward.kind: code`");
           if (s.text) where.emplace_back("a `dataset` with a text reward (`math`, `exact`, `choice`, …)");
           return fmt::format("{}", fmt::join(where, " or "));
         });
}

std::string contextDefaults() {
  return perKind([](const KindSpec& s) {
           return perRole(s, [&](const std::string& role) {
             return s.context.count(role) ? "`" + s.context.at(role) + "`" : std::string();
           });
         }) +
         "; " + kChatWorkflows + ": each role's user message (docs/multi-policy.md)";
}

std::string rewardDefaults() {
  return perKind([](const KindSpec& s) {
    return perRole(s, [&](const std::string& role) { return "`" + s.rewards.at(role).front() + "`"; });
  });
}

std::string rewardsText() {
  return perKind([](const KindSpec& s) {
    return perRole(s, [&](const std::string& role) { return quoted(s.rewards.at(role), " or "); });
  });
}

// ---- the keys' readers (the team keys only where the kind is not single) ---------------------

void readFollowup(YamlReader& r, WorkflowInput& in) {
  in.followup = r.getString("followup", "");
  checkTemplate(r, r.lineOf("followup"), r.keyPath("followup"), *in.followup);
}

SectionSchema<WorkflowInput> makeWorkflowSchema() {
  using W = WorkflowInput;
  return std::move(
      SectionSchema<W>("workflow")
          .choice("kind", &W::kind, kWorkflowKindNames,
                  "`single`: one policy per task, the environment's own episode. The others run a team episode per "
                  "task with one trajectory per role; `solver_selector` and `solver_testgen` over a `dataset` with "
                  "`reward.kind: code` run chat-formatted on programs, `solver_verifier` over a `dataset` with a "
                  "text reward chat-formatted on its problems (docs/multi-policy.md)")
          .rule("single_alone", "a `single` workflow takes no key but `kind`", refuseTeamKeys)
          .rule("environment", environmentsText(), checkKindsEnvironment)
          .custom("roles", "mapping role → policy", "required (multi-agent)",
                  perKind([](const KindSpec& s) { return quoted(s.roles, ", "); }),
                  "the policy each role generates with; one policy per role, every policy of the config used by a "
                  "role",
                  teamMap("roles", &W::roles))
          .rule("every_role_played", "each role of the kind has a policy in `roles`", checkEveryRolePlayed)
          .custom("order", "list of roles", "the kind's order",
                  perKind([](const KindSpec& s) { return "`[" + fmt::format("{}", fmt::join(s.roles, ", ")) + "]`"; }),
                  "turn order within a round (the solver always answers first)", teamKey("order", checkOrder))
          .custom("context", "mapping role → template", contextDefaults(), placeholdersText(),
                  "text appended to the role's transcript before each of its turns; chat workflows: the role's user "
                  "message",
                  teamMap("context", &W::context))
          .rule("chat_only", std::string("`system` and `followup` belong to the ") + kChatWorkflows, refuseChatKeys)
          .custom("system", "mapping role → template", "chat workflows: " + perKind(instructionsText),
                  "placeholders as `context`", "chat workflows only: each role's system message",
                  teamMap("system", &W::system))
          .custom("followup", "template",
                  "solver_testgen: the retry request with `{feedback}`; solver_selector: the request for a second "
                  "program; solver_verifier on text: the solver's prompt again, `{team_context}` the verifier's "
                  "analysis",
                  "placeholders as `context`", "chat workflows only: the solver's next user message",
                  teamKey("followup", readFollowup))
          .custom("rewards", "mapping role → rule", rewardDefaults(), rewardsText(),
                  "each role's reward (`rewards[0]` of its trajectories; `rewards[1]` is the team's)",
                  teamMap("rewards", &W::rewards))
          .rule("each_role",
                "each role's policy is defined and serves no other role; its `system` and `context` use known "
                "placeholders; its reward rule is one its role allows",
                checkEachRole)
          .custom("max_rounds", "integer",
                  "required for " + quoted(kindsWhere([](const KindSpec& s) { return s.loops; }), ", ") +
                      ", 1 for the others",
                  "rounds, 1–16; 1 where the kind does not loop",
                  "solver attempts: a rejected answer (a failed generated test) goes back to the solver with the "
                  "verdict (the failing case) as `{feedback}` (on text: the verifier's analysis as `{team_context}`)",
                  [](YamlReader& r, W& in) {
                    if (in.multiAgent()) in.max_rounds = readRounds(r, in);  // required where the kind loops
                  })
          .finalRule("team_served",
                     "every policy of `policies` plays a role, and one rollout entry of `layout` serves every policy "
                     "of the team (a team episode runs on one rank)",
                     checkTeam));
}

const SectionSchema<WorkflowInput>& workflowSchema() {
  static const SectionSchema<WorkflowInput> schema = makeWorkflowSchema();
  return schema;
}

// One role of the workflow: its policy, its texts (the kind's, or the config's) and its reward
// (the config's, or the first its role allows).
WorkflowRole makeRole(const WorkflowInput& in, bool chat, const std::string& role) {
  const auto& spec = in.spec();
  WorkflowRole out;
  out.name = role;
  out.role = *enumByName(kTeamRoleNames, role);  // the kinds' roles are the enum's names
  out.policy = in.roles.at(role).first;
  out.context = chat ? spec.chat_context.at(role) : spec.context.at(role);
  if (chat && spec.chat_system.count(role)) out.system = spec.chat_system.at(role);
  if (auto it = in.system.find(role); it != in.system.end()) out.system = it->second.first;
  if (auto it = in.context.find(role); it != in.context.end()) out.context = it->second.first;
  const auto given = in.rewards.find(role);
  const std::string& reward = given != in.rewards.end() ? given->second.first : spec.rewards.at(role).front();
  out.reward = *enumByName(kRoleRewardNames, reward);  // every allowed rule is one of the enum's names
  return out;
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
      throw ConfigError(fmt::format("{}: {}.{}: '{}' is not a defined policy; allowed: {}", source, router.key, role,
                                    policy, policyNames(cfg)));
    }
  }
}

}  // namespace

SectionDoc workflowDoc() { return workflowSchema().doc(); }

void parseWorkflow(YamlReader r, Config& cfg) {
  WorkflowInput in;
  in.cfg = &cfg;
  workflowSchema().read(r, in);
  auto& wf = cfg.workflow;
  wf.kind = in.kind;
  if (!wf.multiAgent()) return;
  const KindSpec& spec = in.spec();
  wf.chat = in.chat();
  wf.followup = in.followup.value_or(spec.chat_followup);
  for (const auto& role : spec.roles) wf.roles.push_back(makeRole(in, wf.chat, role));
  wf.max_rounds = in.max_rounds;
  wf.candidates = wf.kind == WorkflowKind::SolverSelector ? 2 : 1;
  routeByRole(cfg, spec, r.source());
}

}  // namespace astraflow
