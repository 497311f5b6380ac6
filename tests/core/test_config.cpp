// Config parsing: the good path fills typed structs with defaults; every bad config is
// refused with a message naming the offending key path and line.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"

using namespace astraflow;

namespace {

const char* kGood = R"(run:
  name: unit
  seed: 7
policies:
  - name: solver
  - name: verifier
layout:
  - {role: dataflow, ranks: 1}
  - {role: trainer, policy: solver, ranks: 2}
  - {role: trainer, policy: verifier}
  - {role: rollout, policies: [solver, verifier], ranks: 3}
dataflow:
  max_staleness: 2
  task_ring: {slots: 64}
)";

}  // namespace

TEST(Config, GoodConfigParsesWithDefaults) {
  const Config c = parseConfig(kGood, "good.yaml");
  EXPECT_EQ(c.run.name, "unit");
  EXPECT_EQ(c.run.seed, 7u);
  EXPECT_EQ(c.run.output_dir, "runs/unit");  // default derives from the name
  EXPECT_EQ(c.run.log_level, LogLevel::Info);
  ASSERT_EQ(c.policies.size(), 2u);
  EXPECT_EQ(c.policies[1].name, "verifier");
  ASSERT_EQ(c.layout.size(), 4u);
  EXPECT_EQ(c.layout[1].role, Role::Trainer);
  EXPECT_EQ(c.layout[1].ranks, 2);
  EXPECT_EQ(c.layout[2].ranks, 1);  // default ranks
  EXPECT_EQ(c.layout[3].policies, (std::vector<std::string>{"solver", "verifier"}));
  EXPECT_EQ(c.layout[3].pool, "pool3");
  EXPECT_EQ(c.layoutRanks(), 7);
  EXPECT_EQ(c.dataflow.max_staleness, 2);
  EXPECT_EQ(c.dataflow.task_ring.slots, 64u);
  EXPECT_EQ(c.dataflow.task_ring.slot_bytes, 512u);  // default kept when only slots given
  // Devices: the CPU in float32 unless asked; c10d collectives; SDPA attention.
  EXPECT_FALSE(c.trainer.compute.device.cuda());
  EXPECT_FALSE(c.rollout.compute.bf16());
  EXPECT_EQ(c.trainer.grad_sync, TrainerSection::GradSync::Auto);
  EXPECT_EQ(c.policies[0].model.attention, AttentionKind::Sdpa);
}

TEST(Config, DeviceAndPrecisionKeys) {
  std::string text = kGood;
  text +=
      "trainer: {device: 'cuda:1', precision: fp32, grad_sync: mpi}\n"
      "rollout: {device: cuda}\n";
  text.replace(text.find("  - name: verifier"), 18, "  - name: verifier\n    model: {attention: eager}");
  const Config c = parseConfig(text, "dev.yaml");
  EXPECT_TRUE(c.trainer.compute.device.cuda());
  EXPECT_EQ(c.trainer.compute.device.index, 1);
  EXPECT_FALSE(c.trainer.compute.bf16());  // fp32 asked for, even on CUDA
  EXPECT_EQ(c.trainer.grad_sync, TrainerSection::GradSync::Mpi);
  EXPECT_EQ(c.rollout.compute.device.index, -1);
  EXPECT_TRUE(c.rollout.compute.bf16());  // auto on CUDA
  EXPECT_EQ(c.policies[1].model.attention, AttentionKind::Eager);
}

// rollout.on_new_version: continue by default in async mode, finish in sync mode; either may be
// asked for in both.
TEST(Config, OnNewVersionFollowsTheRunModeUnlessGiven) {
  EXPECT_EQ(parseConfig(kGood, "a.yaml").rollout.on_new_version, OnNewVersion::Continue);
  std::string sync = kGood;
  sync.replace(sync.find("  seed: 7"), 9, "  seed: 7\n  mode: sync");
  EXPECT_EQ(parseConfig(sync, "s.yaml").rollout.on_new_version, OnNewVersion::Finish);
  EXPECT_EQ(parseConfig(sync + "rollout: {on_new_version: continue}\n", "s.yaml").rollout.on_new_version,
            OnNewVersion::Continue);
  EXPECT_EQ(parseConfig(std::string(kGood) + "rollout: {on_new_version: finish}\n", "a.yaml").rollout.on_new_version,
            OnNewVersion::Finish);
  EXPECT_EQ(parseConfig(std::string(kGood) + "rollout: {on_new_version: abort}\n", "a.yaml").rollout.on_new_version,
            OnNewVersion::Abort);
}

TEST(Config, EnvironmentThreadsKey) {
  EXPECT_EQ(parseConfig(kGood, "a.yaml").rollout.environment_threads, -1);  // auto
  EXPECT_EQ(
      parseConfig(std::string(kGood) + "rollout: {environment_threads: 4}\n", "a.yaml").rollout.environment_threads, 4);
  try {
    parseConfig(std::string(kGood) + "rollout: {environment_threads: -2}\n", "a.yaml");
    ADD_FAILURE() << "accepted -2";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("rollout.environment_threads"), std::string::npos) << e.what();
  }
}

// Every choice parses into its enum from the name table, and a name outside it is refused with
// the key and the table's names.
TEST(Config, ChoicesAreEnumsFromTheirTables) {
  std::string text = kGood;
  text.replace(text.find("  seed: 7"), 9, "  seed: 7\n  memory_check: warn");
  const Config c =
      parseConfig(text + "trainer: {lr_schedule: cosine, sharding: parameters, precision: bf16}\n", "e.yaml");
  EXPECT_EQ(c.trainer.lr_schedule, TrainerSection::LrSchedule::Cosine);
  EXPECT_EQ(c.trainer.sharding, TrainerSection::Sharding::Parameters);
  EXPECT_EQ(c.trainer.compute.precision, Precision::Bf16);
  EXPECT_EQ(c.run.memory_check, RunSection::MemoryCheck::Warn);
  EXPECT_EQ(parseConfig(kGood, "d.yaml").run.memory_check, RunSection::MemoryCheck::Refuse);
  try {
    parseConfig(std::string(kGood) + "trainer: {sharding: zero3}\n", "bad.yaml");
    FAIL() << "sharding: zero3 accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("trainer.sharding"), std::string::npos) << what;
    EXPECT_NE(what.find("none|optimizer|parameters"), std::string::npos) << what;
  }
}

struct BadCase {
  const char* what;
  std::string from;  // text in kGood to replace
  std::string to;
  std::string expect;  // must appear in the error (key path, and often the line)
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.what; }

class BadConfig : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadConfig, ErrorNamesTheKey) {
  const BadCase& c = GetParam();
  std::string text = kGood;
  const auto at = text.find(c.from);
  ASSERT_NE(at, std::string::npos) << "test case does not apply: " << c.from;
  text.replace(at, c.from.size(), c.to);
  try {
    parseConfig(text, "bad.yaml");
    FAIL() << c.what << ": accepted";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": message was: " << msg;
    EXPECT_EQ(msg.rfind("bad.yaml", 0), 0u) << "message must start with the file: " << msg;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadConfig,
    ::testing::Values(
        BadCase{"unknown top-level key", "dataflow:", "dataflw:", "bad.yaml:12: dataflw: unknown key"},
        BadCase{"unknown nested key", "  seed: 7", "  sed: 7", "bad.yaml:3: run.sed: unknown key"},
        BadCase{"wrong type", "  seed: 7", "  seed: seven", "run.seed: given 'seven', not an integer"},
        BadCase{"out of range", "max_staleness: 2", "max_staleness: -1",
                "dataflow.max_staleness: given -1, out of range"},
        BadCase{"bad log level", "  seed: 7", "  log_level: loud",
                "run.log_level: given 'loud'; allowed: trace|debug|info|warn|error"},
        BadCase{"unknown role", "{role: trainer, policy: verifier}", "{role: coach, policy: verifier}",
                "layout[2].role: given 'coach'; allowed: dataflow|trainer|rollout"},
        BadCase{"rollout serves undefined policy", "policies: [solver, verifier]", "policies: [solver, critic]",
                "layout[3].policies[1]: 'critic' is not a defined policy; allowed: solver, verifier"},
        BadCase{"trainer for unknown policy", "policy: verifier}", "policy: judge}",
                "layout[2].policy: 'judge' is not a defined policy"},
        BadCase{"zero ranks", "policy: solver, ranks: 2", "policy: solver, ranks: 0",
                "layout[1].ranks: given 0, out of range"},
        BadCase{"slot size not multiple of 8", "task_ring: {slots: 64}", "task_ring: {slots: 64, slot_bytes: 100}",
                "dataflow.task_ring.slot_bytes: given 100; allowed: a multiple of 8 bytes"},
        BadCase{"ring is a scalar", "task_ring: {slots: 64}", "task_ring: 64",
                "dataflow.task_ring: given '64'; allowed: a mapping of keys"},
        BadCase{"duplicate policy", "  - name: verifier", "  - name: solver",
                "policies[1].name: policy 'solver' is defined twice"},
        BadCase{"two dataflow entries", "{role: trainer, policy: verifier}", "{role: dataflow}",
                "layout[2].role: a second dataflow or gateway entry"},
        BadCase{"policy without trainer", "  - {role: trainer, policy: verifier}\n", "",
                "layout: policy 'verifier' has no trainer entry"},
        BadCase{"missing policies", "policies:\n  - name: solver\n  - name: verifier\n", "",
                "policies: required key is missing"},
        BadCase{"malformed YAML", "  seed: 7", "  seed: [7", "bad.yaml:"},
        BadCase{"layout not a list", "layout:\n", "layout: 4\nx:\n", "layout: given '4'; allowed: a non-empty list"},
        BadCase{"bad device", "dataflow:", "trainer: {device: gpu0}\ndataflow:",
                "trainer.device: given 'gpu0'; allowed: cpu, cuda, cuda:N"},
        BadCase{"bad precision", "dataflow:", "rollout: {precision: fp16}\ndataflow:",
                "rollout.precision: given 'fp16'; allowed: auto|fp32|bf16"},
        BadCase{"bad on_new_version", "dataflow:", "rollout: {on_new_version: sometimes}\ndataflow:",
                "rollout.on_new_version: given 'sometimes'; allowed: finish|continue|abort"},
        BadCase{"bad grad sync", "dataflow:", "trainer: {grad_sync: nccl}\ndataflow:",
                "trainer.grad_sync: given 'nccl'; allowed: auto|c10d|mpi"},
        BadCase{"bad attention", "  - name: solver\n", "  - name: solver\n    model: {attention: flash}\n",
                "policies[0].model.attention: given 'flash'; allowed: sdpa|eager"},
        BadCase{"trainer without policy", "{role: trainer, policy: verifier}", "{role: trainer}",
                "layout[2].policy: required key is missing"}),
    [](const ::testing::TestParamInfo<BadCase>& param_info) {
      std::string name = param_info.param.what;
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

TEST(Config, MissingFileIsAClearError) {
  try {
    loadConfig("/nonexistent/astraflow.yaml");
    FAIL() << "accepted a missing file";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/astraflow.yaml: cannot open"), std::string::npos) << e.what();
  }
}

TEST(Config, EmptyFileIsAClearError) { EXPECT_THROW(parseConfig("", "empty.yaml"), ConfigError); }

// Cross-site: a remote site's layout (gateway + rollout, no trainers) and its section's checks.
TEST(Config, GatewaySiteAndCrossSiteKeys) {
  const std::string remote = R"(policies:
  - name: solver
layout:
  - {role: gateway}
  - {role: rollout, policies: [solver], ranks: 2}
cross_site: {connect: "10.0.0.1:17417", site: site_b}
)";
  const Config c = parseConfig(remote, "remote.yaml");
  EXPECT_TRUE(c.isGatewaySite());
  EXPECT_EQ(c.layout[0].role, Role::Gateway);
  EXPECT_EQ(c.cross_site.site, "site_b");
  EXPECT_EQ(c.cross_site.token_env, "ASTRAFLOW_SITE_TOKEN");
  EXPECT_EQ(c.layoutRanks(), 3);
  EXPECT_EQ(c.weights.mode, WeightsMode::Delta);  // the default

  auto expectError = [](const std::string& text, const std::string& expect) {
    try {
      parseConfig(text, "bad.yaml");
      FAIL() << "accepted: " << text;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  };
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = remote;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  expectError(replaced(R"(cross_site: {connect: "10.0.0.1:17417", site: site_b})", ""), "cross_site.connect: missing");
  expectError(replaced("10.0.0.1:17417", "10.0.0.1"), "cross_site.connect: given '10.0.0.1'; allowed: host:port");
  expectError(replaced("10.0.0.1:17417", "h:99999"), "cross_site.connect");
  expectError(replaced("site: site_b", "site: 'b b'"), "cross_site.site");
  expectError(replaced("  - {role: gateway}\n", "  - {role: gateway}\n  - {role: trainer, policy: solver}\n"),
              "a trainer entry in a gateway site's layout");
  expectError(replaced("site: site_b}", "site: site_b, listen: ':1'}"), "cross_site.listen");
  expectError(replaced("  - {role: gateway}\n", "  - {role: gateway}\n  - {role: dataflow}\n"),
              "a second dataflow or gateway entry");
  // A home job may listen; it may not connect.
  std::string home = kGood;
  home += "cross_site: {listen: \"0.0.0.0:17417\", wait_for_sites: 2}\n";
  EXPECT_EQ(parseConfig(home, "home.yaml").cross_site.wait_for_sites, 2);
  expectError(std::string(kGood) + "cross_site: {connect: \"h:1\"}\n", "the layout has no gateway entry");
  expectError(std::string(kGood) + "weights: {mode: sparse}\n", "weights.mode");
  expectError(std::string(kGood) + "weights: {delta_log: 65}\n", "weights.delta_log");
  expectError(std::string(kGood) + "weights: {encode_threads: -1}\n", "weights.encode_threads");
  const Config w =
      parseConfig(std::string(kGood) + "weights: {mode: full, compression: zstd, encode_threads: 3}\n", "w");
  EXPECT_EQ(w.weights.mode, WeightsMode::Full);
  EXPECT_EQ(w.weights.compression, WeightsCompression::Zstd);
  EXPECT_EQ(w.weights.encode_threads, 3);
}

// layout[i].backend: the http backend's keys, checked like every other key, and --set reaching a
// list entry by index.
TEST(Config, RolloutBackendKeys) {
  Config c = parseConfig(kGood, "good.yaml");
  EXPECT_EQ(c.layout[3].backend.kind, BackendKind::Engine);
  c = parseConfig(
      kGood, "good.yaml",
      {"layout.3.backend={kind: http, api: openai, urls: [\"http://10.0.0.1:8000\", \"http://gpu2:8000/\"], "
       "max_in_flight: 8, retries: 0}"});
  const RolloutBackendSpec& b = c.layout[3].backend;
  EXPECT_TRUE(b.http());
  EXPECT_EQ(b.api, HttpApi::Openai);
  EXPECT_EQ(b.urls.size(), 2u);
  EXPECT_EQ(b.max_in_flight, 8);
  EXPECT_EQ(b.retries, 0);
  EXPECT_EQ(b.update_path, "/update_weights_from_disk");
  const auto refused = [](const std::string& backend, const std::string& says) {
    try {
      parseConfig(kGood, "good.yaml", {"layout.3.backend=" + backend});
      ADD_FAILURE() << backend << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused("{kind: grpc}", "layout[3].backend.kind");
  refused("{kind: http}", "kind http needs servers");
  refused("{kind: http, url: \"http://x:1\", urls: [\"http://y:1\"]}", "not both");
  refused("{kind: http, api: vllm, url: \"http://x:1\", update_path: /reload}", "collective_rpc");
  refused("{kind: http, url: \"http://x:1\", update_failures: 0}", "layout[3].backend.update_failures");
  refused("{kind: http, url: \"https://x:1\"}", "allowed: http://host:port");
  refused("{kind: http, url: \"http://x\"}", "allowed: http://host:port");
  refused("{kind: http, url: \"http://x:1\", api: grpc}", "layout[3].backend.api");
  refused("{kind: http, url: \"http://x:1\", max_in_flight: 0}", "layout[3].backend.max_in_flight");
  refused("{kind: http, url: \"http://x:1\", update_path: reload}", "a path starting with /");
  refused("{kind: http, url: \"http://x:1\", bogus: 1}", "bogus");
  EXPECT_THROW(parseConfig(kGood, "good.yaml", {"layout.9.backend={kind: http}"}), ConfigError);
  // policy_urls: each policy of a team on its own servers, the others on url/urls.
  c = parseConfig(kGood, "good.yaml",
                  {"layout.3.backend={kind: http, api: vllm, policy_urls: {solver: \"http://a:1\", verifier: "
                   "[\"http://b:1\", \"http://c:1\"]}}"});
  EXPECT_EQ(c.layout[3].backend.urlsFor("solver"), std::vector<std::string>{"http://a:1"});
  EXPECT_EQ(c.layout[3].backend.urlsFor("verifier"), (std::vector<std::string>{"http://b:1", "http://c:1"}));
  c = parseConfig(kGood, "good.yaml",
                  {"layout.3.backend={kind: http, url: \"http://d:1\", policy_urls: {verifier: \"http://b:1\"}}"});
  EXPECT_EQ(c.layout[3].backend.urlsFor("solver"), std::vector<std::string>{"http://d:1"});
  EXPECT_EQ(c.layout[3].backend.urlsFor("verifier"), std::vector<std::string>{"http://b:1"});
  refused("{kind: http, policy_urls: {solver: \"http://a:1\"}}", "has no servers for 'verifier'");
  refused("{kind: http, url: \"http://d:1\", policy_urls: {critic: \"http://a:1\"}}", "'critic' is not a policy");
  refused("{kind: http, policy_urls: {solver: \"http://a\", verifier: \"http://b:1\"}}", "allowed: http://host:port");
  refused("{kind: http, policy_urls: {solver: [], verifier: \"http://b:1\"}}", "a non-empty list");
  // launch: servers the pool starts itself, instead of url/urls/policy_urls.
  c = parseConfig(kGood, "good.yaml",
                  {"layout.3.backend={kind: http, api: vllm, launch: {command: [python3, -m, vllm.entrypoints.openai."
                   "api_server], per: node, env: {CUDA_VISIBLE_DEVICES: \"{local_rank}\"}, start_seconds: 60}}"});
  const ServerLaunchSpec& launch = c.layout[3].backend.launch;
  EXPECT_TRUE(launch.enabled());
  EXPECT_EQ(launch.command.size(), 3u);
  EXPECT_EQ(launch.per, LaunchScope::Node);
  EXPECT_EQ(launch.start_seconds, 60);
  ASSERT_EQ(launch.env.size(), 1u);
  EXPECT_EQ(launch.env[0].second, "{local_rank}");
  refused("{kind: http, url: \"http://x:1\", launch: {command: [vllm]}}", "with launch the pool starts its own");
  refused("{kind: http, api: openai, launch: {command: [astraflow, serve, \"{model}\"]}}", "{port} and {model}");
  refused("{kind: http, launch: {per: node}}", "has no command");
  refused("{kind: http, launch: {command: [x], per: cluster}}", "layout[3].backend.launch.per");
  refused("{kind: engine, launch: {command: [x]}}", "belongs to kind: http");
  // The index as the messages write it: layout[3], policies[1].
  c = parseConfig(kGood, "good.yaml",
                  {"layout[3].backend={kind: http, url: \"http://x:1\"}", "policies[1].model.d_model=48"});
  EXPECT_TRUE(c.layout[3].backend.http());
  EXPECT_EQ(c.policies[1].model.d_model, 48);
  EXPECT_EQ(c.policies[0].model.d_model, parseConfig(kGood, "good.yaml").policies[0].model.d_model);
  for (const std::string bad :
       {"layout[9].ranks=1", "layout[x].ranks=1", "layout[3.ranks=1", "layout[3]x.ranks=1", "run[0].name=a"}) {
    EXPECT_THROW(parseConfig(kGood, "good.yaml", {bad}), ConfigError) << bad;
  }
  // Spawned ranks would take the http pool's backend and share its running servers: elastic is refused.
  const std::string http = "layout.3.backend={kind: http, url: \"http://x:1\"}";
  EXPECT_NO_THROW(parseConfig(kGood, "good.yaml", {http}));
  try {
    parseConfig(kGood, "good.yaml", {http, "elastic.mode=auto"});
    ADD_FAILURE() << "elastic with an http pool was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("elastic.mode: given auto"), std::string::npos) << e.what();
  }
  // A pool that launches its servers grows: each spawned rank starts its own.
  EXPECT_NO_THROW(parseConfig(
      kGood, "good.yaml", {"layout.3.backend={kind: http, launch: {command: [vllm-server]}}", "elastic.mode=auto"}));
}

TEST(Config, LrScheduleKeys) {
  Config c = parseConfig(kGood, "good.yaml");
  EXPECT_EQ(c.trainer.lr_schedule, TrainerSection::LrSchedule::Constant);
  c = parseConfig(kGood, "good.yaml",
                  {"trainer={lr_schedule: cosine, warmup_steps: 10, lr_floor: 0.1, decay_steps: 500}"});
  EXPECT_EQ(c.trainer.lr_schedule, TrainerSection::LrSchedule::Cosine);
  EXPECT_EQ(c.trainer.warmup_steps, 10);
  EXPECT_DOUBLE_EQ(c.trainer.lr_floor, 0.1);
  EXPECT_EQ(c.trainer.decay_steps, 500);
  EXPECT_THROW(parseConfig(kGood, "good.yaml", {"trainer.lr_schedule=step"}), ConfigError);
  EXPECT_THROW(parseConfig(kGood, "good.yaml", {"trainer.lr_floor=2"}), ConfigError);
}

TEST(Config, TrainerAtScaleKeys) {
  Config c = parseConfig(kGood, "good.yaml");
  EXPECT_EQ(c.trainer.mini_batches, 1);
  EXPECT_EQ(c.trainer.micro_batch_tokens, 0);
  EXPECT_FALSE(c.trainer.packing);
  EXPECT_FALSE(c.trainer.activation_checkpointing);
  c = parseConfig(
      kGood, "good.yaml",
      {"trainer={mini_batches: 4, micro_batch_tokens: 16384, packing: true, activation_checkpointing: true}"});
  EXPECT_EQ(c.trainer.mini_batches, 4);
  EXPECT_EQ(c.trainer.micro_batch_tokens, 16384);
  EXPECT_TRUE(c.trainer.packing);
  EXPECT_TRUE(c.trainer.activation_checkpointing);
  EXPECT_EQ(parseConfig(kGood, "good.yaml", {"trainer.sharding=parameters"}).trainer.sharding,
            TrainerSection::Sharding::Parameters);
  // The KL penalty's frozen reference is sharded as the trainer is (test_param_sharding.cpp).
  EXPECT_DOUBLE_EQ(
      parseConfig(kGood, "good.yaml", {"trainer.sharding=parameters", "trainer.loss.kl_coef=0.1"}).trainer.loss.kl_coef,
      0.1);
  for (const char* bad :
       {"trainer.mini_batches=0", "trainer.micro_batch_tokens=-1", "trainer.packing=maybe", "trainer.sharding=fsdp"}) {
    try {
      parseConfig(kGood, "good.yaml", {bad});
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      const std::string key = std::string(bad).substr(8, std::string(bad).find('=') - 8);
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}

// The simulation keys (docs/simulation.md): a simulated pool's workload and cost model, a
// simulated trainer, and the refusals that name the key.
TEST(Config, SimulationKeys) {
  const std::vector<std::string> sim = {
      "layout.3.backend={kind: simulated, lengths: {kind: lognormal, median: 300, sigma: 1.2, max: 8192}, "
      "decode_tokens_per_second: 40, batching: static, batch_limit: 128, success_rate: 0.2, "
      "success_gain_per_version: 0.01}",
      "trainer.simulate={fixed_seconds: 1.5, seconds_per_token: 0.0001, weight_bytes: 1000000}"};
  const Config base = parseConfig(kGood, "good.yaml");
  ASSERT_EQ(base.layout.size(), 4u);
  ASSERT_EQ(base.layout[3].role, Role::Rollout);
  const Config c = parseConfig(kGood, "good.yaml", sim);
  const auto& b = c.layout[3].backend;
  EXPECT_TRUE(b.isSimulated());
  EXPECT_EQ(b.simulated.lengths, SimulatedBackendSpec::Lengths::Lognormal);
  EXPECT_DOUBLE_EQ(b.simulated.median, 300);
  EXPECT_DOUBLE_EQ(b.simulated.sigma, 1.2);
  EXPECT_EQ(b.simulated.max_tokens, 8192);
  EXPECT_DOUBLE_EQ(b.simulated.decode_tokens_per_second, 40);
  EXPECT_EQ(b.simulated.batch_limit, 128);
  EXPECT_EQ(b.simulated.batching, SimulatedBackendSpec::Batching::Static);
  EXPECT_EQ(base.layout[3].backend.simulated.batching, SimulatedBackendSpec::Batching::Continuous);
  EXPECT_DOUBLE_EQ(b.simulated.success_gain_per_version, 0.01);
  EXPECT_TRUE(c.trainer.simulate.enabled);
  EXPECT_DOUBLE_EQ(c.trainer.simulate.fixed_seconds, 1.5);
  EXPECT_EQ(c.trainer.simulate.weight_bytes, 1000000);
  EXPECT_FALSE(base.trainer.simulate.enabled);
  auto refused = [&](std::vector<std::string> overrides, const std::string& key) {
    try {
      parseConfig(kGood, "good.yaml", overrides);
      ADD_FAILURE() << key << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  // A simulated trainer's versions are not a model: every pool must be simulated.
  refused({sim[1]}, "layout[3].backend.kind");
  refused({sim[0], "trainer.simulate={weight_bytes: 3}"}, "weight_bytes");
  refused({"layout.3.backend={kind: simulated, lengths: {kind: zipf}}"}, "lengths.kind");
  refused({"layout.3.backend={kind: simulated, lengths: {kind: lognormal, min: 50, max: 10}}"}, "lengths.max");
  refused({"layout.3.backend={kind: simulated, batch_limit: 0}"}, "batch_limit");
  refused({"layout.3.backend={kind: simulated, batching: paged}"}, "batching");
  refused({"layout.3.backend={kind: simulated, url: \"http://x:1\"}"}, "url");
}
