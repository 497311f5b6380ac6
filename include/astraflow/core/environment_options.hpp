#pragma once
// Options of the environments (config section `environment`). A plain struct in core so the
// config parser needs nothing of the tasks module that implements the environments.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "astraflow/core/enum_names.hpp"

namespace astraflow {

// environment.reward.kind (docs/tasks.md).
enum class RewardKind { Math, Exact, Regex, Choice, Code, Command, Http };
inline constexpr std::array<EnumName<RewardKind>, 7> kRewardKindNames{{{"math", RewardKind::Math},
                                                                       {"exact", RewardKind::Exact},
                                                                       {"regex", RewardKind::Regex},
                                                                       {"choice", RewardKind::Choice},
                                                                       {"code", RewardKind::Code},
                                                                       {"command", RewardKind::Command},
                                                                       {"http", RewardKind::Http}}};

// The reward a text environment scores each response with (environment.reward, docs/tasks.md).
struct RewardSpec {
  RewardKind kind = RewardKind::Math;
  std::string pattern;  // math: the answer pattern used without \boxed{} (empty: the default); regex: the pattern (RE2)
  int decimals = 6;     // math: an answer written with a decimal point is compared rounded to this many places
  // code: the row's tests run in the sandbox
  std::string interpreter = "/usr/bin/python3";
  bool all_or_nothing = false;
  double wall_seconds = 10;       // per test run
  std::uint64_t memory_mb = 512;  // address space per process of a run
  // command: the user's verifier program and its arguments
  std::vector<std::string> command;
  double command_timeout = 30;
  // command: one process per rollout rank that reads a JSON object per line and answers a line
  // each (tasks/reward_worker.hpp), started again after max_items items (0: never) or a failure
  bool persistent = false;
  std::uint64_t max_items = 0;
  // http: the URL the object is POSTed to (http://host:port/path); the answer is the body
  std::string url;
  // The whole reward call: past it the response gets reward 0 with reason `timeout`. Bounds the
  // code reward's test runs together and the command's run; the in-process kinds are linear in
  // the response and are held to it once they return.
  double timeout_seconds = 60;
};

// Rewrites of a row's prompt at load (its text, or its last user message): a suffix stripped (the
// first of `strip_suffixes` that ends it, spaces aside), then `append` added (environment.prompt_rewrite).
struct PromptRewrite {
  std::vector<std::string> strip_suffixes;
  std::string append;
  bool empty() const { return strip_suffixes.empty() && append.empty(); }
};

// A named evaluation set (eval.sets): its rows' files, how many of them a round evaluates and how
// many answers each gets. The dataset environments load the files (problem ids name the set);
// the dataflow rank reports each set on its own and their mean (docs/tasks.md "Evaluation").
struct EvalSetSpec {
  std::string name;                // an identifier; not `held_out` (the environment's own held-out rows)
  std::vector<std::string> files;  // absolute paths, read as environment.train's
  std::uint64_t problems = 0;      // per round: the set's first rows; 0 = every row
  int samples = 0;                 // answers per problem; 0 = eval.samples
};

// The `dataset` environment: prompts from JSONL, Parquet or Arrow files, rendered with the
// policy's chat template, answered in one turn and scored by `reward` against the row's answer.
struct DatasetTaskOptions {
  std::vector<std::string> train_files;  // absolute paths
  std::vector<std::string> eval_files;   // held-out rows; none: `eval_fraction` of train_files
  double eval_fraction = 0.0;
  std::vector<EvalSetSpec> eval_sets;  // eval.sets, copied here at parse: every rank loads their rows
  std::uint64_t max_prompt_bytes = 64 * 1024;
  std::uint64_t max_prompt_tokens = 0;         // rows past it (rendered, the policy's tokens) skipped; 0: none
  std::map<std::string, std::string> columns;  // prompt / messages / answer / tests → the row's column
  PromptRewrite rewrite;
  std::string system_prompt;                // empty: none (a row's own system message is kept)
  std::string solution_field = "solution";  // a row's worked answer, for warm-start SFT
  std::string enable_thinking;              // "", "true" or "false": the template variable, when set
  std::uint64_t seed = 1;                   // split and epoch shuffles (run.seed)
  // The policies' Hugging Face folders (policies[i].model.hf): the first one's tokenizer.json and
  // chat template are the run's; the others must hold the same tokenizer.json.
  std::vector<std::string> tokenizer_folders;
};

// A Model Context Protocol server whose tools the policy may call (environment.tools.mcp,
// docs/tasks.md "Tools from MCP servers"): started per rollout rank over stdio, or reached at a URL.
struct McpServerOptions {
  std::string name;                                      // in the log and in errors
  std::vector<std::string> command;                      // the program and its arguments (stdio), or
  std::string url;                                       // a running server (streamable HTTP)
  std::vector<std::pair<std::string, std::string>> env;  // added to the host's environment
  double timeout_seconds = 30;                           // start-up (initialize, tools/list) and each call
};

// The multi-turn tool environments (`code_interpreter`, `doc_search`; config section
// `environment.tool`, docs/tasks.md).
struct ToolOptions {
  int max_context_tokens = 0;         // an episode past it ends truncated; 0: the model's max_seq_len
  std::uint64_t output_bytes = 2048;  // of a tool's reply shown to the policy (the rest cut, said so)
  // code_interpreter: each code run in the sandbox
  std::string interpreter = "/usr/bin/python3";
  double wall_seconds = 5;
  std::uint64_t memory_mb = 512;
  // doc_search: a JSONL corpus ({"text", "title"?, "id"?} per line), searched with BM25
  std::string corpus;  // absolute path
  int top_k = 3;
  std::uint64_t document_bytes = 512;  // of each document's text in a reply
};

// environment.openenv.interface: how a policy's turn becomes an OpenEnv action. text: the turn's
// text in `action_field`; mcp: the server is an MCPEnvironment, its tools listed with
// ListToolsAction and each tool call of the turn sent as a CallToolAction.
enum class OpenEnvInterface { Text, Mcp };
inline constexpr std::array<EnumName<OpenEnvInterface>, 2> kOpenEnvInterfaceNames{
    {{"text", OpenEnvInterface::Text}, {"mcp", OpenEnvInterface::Mcp}}};
// Who starts a `command` server: each rollout rank its own, or one per node that the node's
// ranks share (the first to need it starts it; docs/tasks.md).
enum class OpenEnvServerScope { Rank, Node };
inline constexpr std::array<EnumName<OpenEnvServerScope>, 2> kOpenEnvServerScopeNames{
    {{"rank", OpenEnvServerScope::Rank}, {"node", OpenEnvServerScope::Node}}};
// The episode's reward from the server's step rewards: their sum, or the last one.
enum class OpenEnvReward { Sum, Last };
inline constexpr std::array<EnumName<OpenEnvReward>, 2> kOpenEnvRewardNames{
    {{"sum", OpenEnvReward::Sum}, {"last", OpenEnvReward::Last}}};
// The chat role observations after the first are rendered as (the names are the roles').
enum class ObservationRole { User, Tool };
inline constexpr std::array<EnumName<ObservationRole>, 2> kObservationRoleNames{
    {{"user", ObservationRole::User}, {"tool", ObservationRole::Tool}}};

// The `openenv` environment (config section `environment.openenv`, docs/tasks.md "OpenEnv
// environments"): each episode is one session on an OpenEnv server's WebSocket endpoint /ws.
struct OpenEnvOptions {
  std::string url;  // a running server, http://host:port; empty: `command` is started
  // A server each rollout rank starts itself ("{port}" in an argument: a free port the rank picks)
  std::vector<std::string> command;
  std::vector<std::pair<std::string, std::string>> env;  // added to the host's environment
  std::string log_dir;                                   // where a started server's log goes
  OpenEnvServerScope server_per = OpenEnvServerScope::Rank;
  OpenEnvInterface interface = OpenEnvInterface::Text;
  std::string action_field = "message";  // the action object's field that receives the policy's text
  std::string observation_field;         // the observation field shown to the policy; empty: the first string one
  ObservationRole observation_role = ObservationRole::User;
  std::string reset_json = "{}";    // a JSON object merged into every reset's data
  std::string seed_field = "seed";  // the reset field that carries the episode's seed
  // Training seeds are 0 … eval_seed_start-1 (cycled); held-out ones eval_seed_start, +1, …
  std::uint64_t eval_seed_start = 1000000;
  OpenEnvReward reward = OpenEnvReward::Sum;
  double timeout_seconds = 30;             // each connect, reset and step
  double start_seconds = 120;              // a started server's /health must answer within it
  int max_context_tokens = 0;              // an episode past it ends truncated; 0: the model's max_seq_len
  std::uint64_t observation_bytes = 8192;  // of an observation shown to the policy (the rest cut, said so)
  std::vector<std::string> stop;           // text that also ends a turn, beside the end-of-turn token
  // JSONL of {"seed", "actions"}: the turns `astraflow sft` plays and trains on; empty: none
  std::string demonstrations;
};

// The environments over JSONL prompt datasets, encoded with the policy folder's tokenizer and
// chat template: `dataset`, `code_interpreter`, `doc_search`.
inline bool usesPromptDataset(const std::string& name) {
  return name == "dataset" || name == "code_interpreter" || name == "doc_search";
}
// Those and `openenv`: episodes are chats, encoded with the policy folder's tokenizer and chat
// template (DatasetTaskOptions::tokenizer_folders).
inline bool usesPolicyTokenizer(const std::string& name) { return usesPromptDataset(name) || name == "openenv"; }

// Options of the environments (config section `environment`, docs/configuration.md).
struct EnvironmentOptions {
  std::string name = "arithmetic";
  // arithmetic
  int digits = 2;                // operands have 1..digits digits
  std::string operators = "+-";  // any of + - *
  // search
  int corpus_size = 64;  // key–value facts generated from the seed
  int max_turns = 4;     // agent turns per episode (search, code_interpreter, doc_search, openenv)
  // environment.tools.mcp: MCP servers whose tools join the episode's (the dataset environments)
  std::vector<McpServerOptions> mcp_servers;
  std::uint64_t corpus_seed = 7;  // the corpus is a function of this seed
  // dataset
  DatasetTaskOptions dataset;
  RewardSpec reward;
  ToolOptions tool;  // code_interpreter, doc_search
  OpenEnvOptions openenv;
};

}  // namespace astraflow
