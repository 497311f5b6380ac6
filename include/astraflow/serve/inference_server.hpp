#pragma once
// `astraflow serve MODEL_DIR`: an HTTP inference server over the built-in engine, speaking the
// subset of SGLang's native API and of the OpenAI API that RL rollouts use (docs/rollout-backends.md):
//   SGLang   POST /generate, POST /update_weights_from_disk, GET /get_model_info,
//            GET /get_weight_version, GET /health, GET /health_generate
//   OpenAI   GET /v1/models, POST /v1/completions, POST /v1/chat/completions (streaming with
//            server-sent events, logprobs)
// Requests are batched as they arrive (serve/generation_queue.hpp). It is what the http rollout
// backend is tested against, and a way to try a folder a run exported.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace astraflow {

// What one client may ask and how long it may take (docs/rollout-backends.md, "Limits"). Past
// each, the request is answered 4xx (or the connection closed) and counted by reason in
// GET /get_server_info; the server goes on serving everyone else.
struct ServeLimits {
  std::uint64_t max_body_bytes = std::uint64_t{64} << 20;  // a larger body: 413, code body_too_large
  int max_json_depth = 64;                                 // deeper nesting: 400, code json_too_deep
  // Prompt tokens plus max_tokens, summed over the request's prompts and their n choices: what
  // the request may make the engine hold and generate. Past it: 400, code request_too_large.
  std::int64_t max_request_tokens = std::int64_t{1} << 20;
  // A request (headers and body) not received within this is dropped with its connection, so a
  // client that stops halfway holds a thread no longer.
  double read_timeout_s = 30;
  double idle_timeout_s = 5;  // an idle keep-alive connection is closed after this
};

struct ServeOptions {
  std::filesystem::path model;  // a Hugging Face folder: config.json, safetensors, tokenizer.json
  std::string host = "127.0.0.1";
  int port = 30000;                  // SGLang's default; 0 = any free port
  std::string served_name;           // the model id of /v1/models; empty = the folder's name
  std::string device = "cpu";        // cpu | cuda | cuda:N
  std::string precision = "auto";    // auto (bf16 on CUDA) | fp32 | bf16
  int max_batch = 32;                // rows generated together
  double batch_wait_ms = 2;          // a batch waits this long after its first request for more to arrive
  int http_threads = 512;            // connections served at once
  std::uint64_t seed = 0;            // the sampler's seed
  std::string weight_version = "0";  // reported until the first /update_weights_from_disk
  // Sample as an astraflow policy does: <pad>, <bos> and ids past the tokenizer never drawn
  // (false: the model's whole vocabulary, as transformers' generate samples it).
  bool policy_mask = true;
  ServeLimits limits;
};

namespace serve_detail {
struct ServeState;
}

class InferenceServer {
 public:
  // Loads the folder (weights, tokenizer, chat template if it has one) and binds the port;
  // throws Error naming what is wrong.
  explicit InferenceServer(const ServeOptions& options);
  ~InferenceServer();
  InferenceServer(const InferenceServer&) = delete;
  InferenceServer& operator=(const InferenceServer&) = delete;

  int port() const;
  void start();  // serves on background threads
  void stop();
  std::string statsLine() const;  // requests, batches, mean batch, tokens, weight updates, refusals

 private:
  std::unique_ptr<serve_detail::ServeState> state_;
};

}  // namespace astraflow
