// `astraflow serve MODEL_DIR`: the CLI options of ServeOptions, and an InferenceServer run in the foreground until
// SIGINT or SIGTERM, its port written to --port-file when asked.
#include "apps/serve_command.hpp"

#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <fstream>

#include "astraflow/serve/inference_server.hpp"

namespace astraflow {

struct ServeArgs {
  ServeOptions options;
  std::string port_file;
};

ServeCommand addServeCommand(CLI::App& app) {
  ServeCommand c;
  c.args = std::make_shared<ServeArgs>();
  ServeOptions& o = c.args->options;
  auto* cmd = app.add_subcommand(
      "serve", "an HTTP inference server over a Hugging Face folder: SGLang /generate and OpenAI /v1 APIs");
  cmd->add_option("model", o.model, "the model folder (config.json, safetensors, tokenizer.json)")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--host", o.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", o.port, "port (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--port-file", c.args->port_file, "write the port here once listening");
  cmd->add_option("--served-model-name", o.served_name, "the model id clients ask for (default: the folder's name)");
  cmd->add_option("--device", o.device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--precision", o.precision, "auto (bf16 on CUDA), fp32 or bf16")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "fp32", "bf16"}));
  cmd->add_option("--max-batch", o.max_batch, "rows generated together")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--batch-wait-ms", o.batch_wait_ms, "how long a batch waits after its first request for more")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10000.0));
  cmd->add_option("--http-threads", o.http_threads, "connections served at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--seed", o.seed, "the sampler's seed")->capture_default_str();
  cmd->add_flag(
      "!--no-policy-mask", o.policy_mask,
      "sample from the whole vocabulary (default: <pad>, <bos> and ids past the tokenizer are never drawn, as "
      "in an astraflow policy)");
  cmd->add_option("--weight-version", o.weight_version, "the version reported until the first weight update")
      ->capture_default_str();
  // Limits (docs/rollout-backends.md, "Limits"): past each a 4xx answer, counted in /get_server_info.
  ServeLimits& l = o.limits;
  cmd->add_option("--max-body-bytes", l.max_body_bytes, "largest request body (413 past it)")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{1024}, std::uint64_t{1} << 40));
  cmd->add_option("--max-json-depth", l.max_json_depth, "deepest nesting of a request body (400 past it)")
      ->capture_default_str()
      ->check(CLI::Range(4, 10000));
  cmd->add_option("--max-request-tokens", l.max_request_tokens,
                  "prompt tokens plus max tokens, times n, summed over a request's prompts (400 past it)")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  cmd->add_option("--read-timeout", l.read_timeout_s,
                  "seconds a connection may go without sending while its request is incomplete (then dropped)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--idle-timeout", l.idle_timeout_s, "seconds an idle keep-alive connection stays open")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  c.command = cmd;
  return c;
}

int ServeCommand::run() const {
  if (!command || !*command) return -1;
  // Every thread the server starts inherits the blocked signals; this one waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::unique_ptr<InferenceServer> server;
  try {
    server = std::make_unique<InferenceServer>(args->options);
    server->start();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "astraflow serve: %s\n", e.what());
    return 2;
  }
  spdlog::info("astraflow serve: http://{}:{} serves {} (SGLang /generate, OpenAI /v1); stop with Ctrl-C",
               args->options.host, server->port(), args->options.model.string());
  if (!args->port_file.empty()) {
    // Written whole under a temporary name first, so a reader never sees half a number.
    const std::string tmp = args->port_file + ".tmp";
    std::ofstream(tmp) << server->port() << "\n";
    std::rename(tmp.c_str(), args->port_file.c_str());
  }
  int signal = 0;
  sigwait(&signals, &signal);
  server->stop();
  spdlog::info("astraflow serve: stopped on signal {}: {}", signal, server->statsLine());
  return 0;
}

}  // namespace astraflow
