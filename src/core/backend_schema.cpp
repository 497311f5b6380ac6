// A rollout pool's `backend` declared once (config_schema.hpp): its kind, an inference server's
// keys (kind http) and a simulated accelerator's (kind simulated, merged from simulatedSchema),
// with the check that each kind's keys go with it. docs/configuration.md's table is generated
// from it.
#include <fmt/format.h>

#include <algorithm>

#include "astraflow/core/placeholders.hpp"
#include "astraflow/core/text_pattern.hpp"
#include "core/section_schemas.hpp"

namespace astraflow::detail {

namespace {

using B = RolloutBackendSpec;

// "http://host:port" with an optional trailing slash: what HttpClient connects to.
bool isHttpUrl(const std::string& url) {
  static const TextPattern pattern(R"(http://[A-Za-z0-9._\-\[\]:]+:[0-9]{1,5}/?)", "the http backend url check");
  return pattern.fullMatch(url).has_value();
}

// `url` (one server) or `urls` (one per rank), exactly one of them for kind http.
void readUrls(YamlReader& r, B& b) {
  if (r.has("url")) b.urls = {r.requireString("url")};
  if (r.has("urls")) b.urls = r.requireStringList("urls");
}

// `policy_urls`: policy name → one url or a list of them (each policy's own servers).
void readPolicyUrls(YamlReader& r, B& b) {
  const auto node = r.raw("policy_urls");
  if (!node) return;
  const auto refuse = [&](const YAML::Node& n, const std::string& what) {
    r.failAt(n.Mark().line + 1, r.keyPath("policy_urls"), "given " + detail::describe(n) + "; allowed: " + what);
  };
  if (!node->IsMap()) refuse(*node, "a mapping policy: url or [urls]");
  for (const auto& kv : *node) {
    auto& urls = b.policy_urls[kv.first.as<std::string>()];
    if (kv.second.IsScalar()) {
      urls = {kv.second.Scalar()};
    } else if (kv.second.IsSequence() && kv.second.size() > 0) {
      for (const auto& u : kv.second) {
        if (!u.IsScalar()) refuse(u, "a url");
        urls.push_back(u.Scalar());
      }
    } else {
      refuse(kv.second, "a url or a non-empty list of urls");
    }
  }
}

using L = ServerLaunchSpec;

// backend.launch: the servers the pool starts itself.
const SectionSchema<ServerLaunchSpec>& launchSchema() {
  static const auto schema = [] {
    SectionSchema<L> s("layout[i].backend.launch");
    s.custom("command", "list of strings", "none (no servers started)",
             "the program and its arguments; `{port}`, `{model}`, `{local_rank}` replaced",
             "http: each rollout rank (or node: `per`) starts one server per policy it serves from the policy's "
             "first version (`{model}`: its folder) on a free port (`{port}`), waits for `/health`, starts it "
             "again when it dies (its failed episodes are re-issued) and stops it at the end. `api: vllm` adds "
             "`--model`, `--port`, `--host 127.0.0.1` and `--logprobs-mode processed_logprobs` unless given, and "
             "`VLLM_SERVER_DEV_MODE=1`; `api: sglang` adds `--model-path`, `--port`, `--host`; `api: openai` "
             "needs `{port}` and `{model}` in the command",
             [](YamlReader& r, L& l) { readList(r, "command", l.command); })
        .custom("env", "mapping", "none", "NAME: value",
                "http: added to the host's environment for each started server (`{local_rank}` replaced: the "
                "rank's index on its node from Open MPI, MPICH or Slurm, e.g. `CUDA_VISIBLE_DEVICES`)",
                [](YamlReader& r, L& l) { l.env = environmentVariables(r); })
        .choice("per", &L::per, kLaunchScopeNames,
                "http: `rank` — each rollout rank starts its own servers; `node` — the node's first rank of the "
                "pool starts them and the node's other ranks use them")
        .number("start_seconds", &L::start_seconds, 1.0, 86400.0, "seconds",
                "http: a started server's `/health` must answer within it (vLLM's start compiles its model)")
        .integer("max_restarts", &L::max_restarts, 0, 1000000, "restarts",
                 "http: a server that died is started again this many times per rank and policy; when it dies "
                 "again the rank gives it up (one that crashes at every request, e.g. a model its kernels do not "
                 "take) and leaves its pool, its tasks going back")
        .text("log_dir", &L::log_dir, "a folder",
              "http: each started server's stdout and stderr, one file per start (`<api>-<host>-<pid>-<n>.log`)",
              "`<run.output_dir>/servers`");
    return s;
  }();
  return schema;
}

// An inference server's keys (kind http; docs/rollout-backends.md).
void httpKeys(SectionSchema<B>& s) {
  s.choice("api", &B::api, kHttpApiNames,
           "http: `sglang` (POST /generate with `input_ids`, `return_logprob`), `openai` (POST /v1/completions "
           "with token-id prompts, `logprobs`, vLLM's `return_tokens_as_token_ids`) or `vllm` (a vLLM server: its "
           "/v1/completions as `openai`; each version through its development endpoints, `/pause`, `/collective_rpc` "
           "`reload_weights`, `/reset_prefix_cache`, `/update_weight_version`, `/resume`: started with "
           "`VLLM_SERVER_DEV_MODE=1` and `--logprobs-mode processed_logprobs`)")
      .custom("url", "string", "required (or `urls`)", "`http://host:port`", "http: the pool's one server", readUrls)
      .custom("urls", "list of strings", "required (or `url`)", "`http://host:port` each",
              "http: one server per rank; rank i of the pool drives `urls[i % len]`",
              [](YamlReader&, B&) {})  // read with `url`
      .custom("policy_urls", "mapping policy → url or list", "none", "`http://host:port` each",
              "http: each policy's own servers (rank i of the pool drives a policy's `[i % len]`): requests and "
              "weight updates of a policy go only to its servers, so a team's policies never share one; a served "
              "policy without an entry uses `url`/`urls`",
              readPolicyUrls)
      .text("model", &B::model, "a model id", "http, `openai` and `vllm`: the model id requests name",
            "the first id of `/v1/models`")
      .integer("max_in_flight", &B::max_in_flight, 1, 4096, "requests",
               "http: requests one rank keeps in flight (one keep-alive connection each)")
      .number("timeout_seconds", &B::timeout_seconds, 0.1, 86400.0, "seconds", "http: one request's read limit")
      .integer("retries", &B::retries, 0, 100, "retries",
               "http: a request that fails (refused, timed out, 5xx/408/429, malformed body, short or non-finite "
               "log-probs) is sent again this many times; a 4xx is not retried")
      .number("backoff_seconds", &B::backoff_seconds, 0.0, 3600.0, "seconds",
              "http: wait before the first retry, doubling each time")
      .text("weights_dir", &B::weights_dir, "path",
            "http: where each version is written as a Hugging Face folder for the server (a filesystem the server "
            "reads)",
            "`<output_dir>/served_weights`")
      .text("update_path", &B::update_path, "a path from `/`",
            "http, `sglang` and `openai`: the server's load-from-disk endpoint (`{model_path, weight_version}`)")
      .integer("update_failures", &B::update_failures, 1, 1000, "updates",
               "http: weight updates in a row the server may refuse (each after its retries; an unreachable server "
               "is `lost_after_seconds`'s) before the run stops with an error naming the server and its answer")
      .choice("update_mode", &B::update_mode, kHttpUpdateModeNames,
              "http: `finish`: requests in flight finish on the old version, tagged with it (vLLM: paused with "
              "`mode=wait` around the update); `abort`: the server is paused with mode abort around the update "
              "(`/pause_generation`, `/continue_generation`; vLLM's `/pause?mode=abort`, `/resume`) and each "
              "aborted request resumes from the tokens it made (prompt + those tokens; the rest on the new version)")
      .integer("keep_versions", &B::keep_versions, 1, 1000, "versions", "http: version folders kept per policy")
      .number("logprob_tolerance", &B::logprob_tolerance, 0.0, 100.0, "nats",
              "http: at the first version a server confirms, each rank scores one sampled answer of it (the run's "
              "temperature, top_p 1, up to 16 tokens) with its own copy of the weights; a mean |difference| of "
              "the log-probs above this stops the run with an error (log-probs before the temperature, another "
              "model); 0: no check")
      .nested("launch", &B::launch, launchSchema())
      .number("lost_after_seconds", &B::lost_after_seconds, 1.0, 86400.0, "seconds",
              "http: a server silent this long gets one try per request, and its rank leaves the pool (its failed "
              "tasks were given back); a pool whose ranks have all left is lost and its tasks are re-issued "
              "elsewhere");
}

// The names httpKeys declares.
const std::vector<std::string>& httpKeyNames() {
  static const std::vector<std::string> names = [] {
    SectionSchema<B> s("http");
    httpKeys(s);
    return s.keyNames();
  }();
  return names;
}

// Checked right after `kind`, before the other keys are read: each kind's keys only with it.
void refuseOtherKindsKeys(YamlReader& r, const B& b) {
  const auto refuse = [&](const std::vector<std::string>& keys, const char* owner) {
    for (const auto& key : keys)
      if (r.has(key))
        r.fail(key, fmt::format("belongs to kind: {}; kind is {}", owner, enumName(kBackendKindNames, b.kind)));
  };
  if (!b.http()) refuse(httpKeyNames(), "http");
  if (!b.http()) refuse({"launch"}, "http");  // a nested section: its keys are listed as launch.<key>
  if (!b.isSimulated()) refuse(simulatedSchema().keyNames(), "simulated");
}

// After every key: kind http needs its servers' addresses (which policies `policy_urls` must
// cover without `url`/`urls` is the layout entry's check: it knows the pool's policies).
void requireServers(YamlReader& r, const B& b) {
  if (!b.http()) return;
  if (b.launch.enabled()) {
    for (const char* key : {"url", "urls", "policy_urls"})
      if (r.has(key)) r.fail(key, "belongs to servers someone else runs; with launch the pool starts its own");
    if (b.api == HttpApi::Openai &&
        (!holdsPlaceholder(b.launch.command, "{port}") || !holdsPlaceholder(b.launch.command, "{model}")))
      r.fail("launch",
             "command: api openai needs {port} and {model} in the command (e.g. [astraflow, serve, \"{model}\", "
             "--port, \"{port}\"]); api vllm and sglang add them");
    return;
  }
  if (r.has("launch")) r.fail("launch", "has no command: give launch.command, or url/urls for running servers");
  if (r.has("url") && r.has("urls")) r.fail("url", "give one of url (one server) and urls (one per rank), not both");
  if (!r.has("url") && !r.has("urls") && b.policy_urls.empty())
    r.fail("url", "kind http needs servers: url (one), urls (one per rank) or policy_urls (per policy)");
  for (const auto& u : b.urls)
    if (!isHttpUrl(u)) r.fail(r.has("url") ? "url" : "urls", fmt::format("given '{}'; allowed: http://host:port", u));
  for (const auto& [policy, urls] : b.policy_urls)
    for (const auto& u : urls)
      if (!isHttpUrl(u)) r.fail("policy_urls", fmt::format("{}: given '{}'; allowed: http://host:port", policy, u));
}

}  // namespace

const SectionSchema<RolloutBackendSpec>& backendSchema() {
  static const auto schema = [] {
    SectionSchema<B> s("layout[i].backend");
    s.custom("kind", "string", "`engine`", namesText(kBackendKindNames),
             "required in a `backend` mapping. `engine`: the in-process engine; `http`: an external inference "
             "server (docs/rollout-backends.md); `simulated`: no model, a drawn workload on a modelled accelerator "
             "(docs/simulation.md)",
             [](YamlReader& r, B& b) { b.kind = r.requireEnum("kind", kBackendKindNames); });
    s.rule("kind_keys",
           "each kind's keys only with it (`api` … `lost_after_seconds`: http; `lengths` … `success_max`: "
           "simulated); checked before they are read",
           refuseOtherKindsKeys);
    httpKeys(s);
    s.merged(&B::simulated, simulatedSchema())
        .rule("servers",
              "kind http needs `url`, `urls` or `policy_urls` (not both `url` and `urls`), each `http://host:port`, "
              "or `launch.command` (and none of them); with `api: openai` the command holds `{port}` and `{model}`",
              requireServers)
        .rule("update_path", "`update_path` starts with `/`; not with `api: vllm`, whose updates have their own calls",
              [](YamlReader& r, const B& b) {
                if (b.update_path.empty() || b.update_path[0] != '/')
                  r.fail("update_path", fmt::format("given '{}'; allowed: a path starting with /", b.update_path));
                if (b.api == HttpApi::Vllm && r.has("update_path"))
                  r.fail("update_path",
                         "api vllm loads each version with POST /collective_rpc reload_weights; allowed: no "
                         "update_path, or api sglang / openai");
              });
    return s;
  }();
  return schema;
}

}  // namespace astraflow::detail
