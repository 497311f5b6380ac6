#pragma once
// Reading an inference server's answer into a Generation (docs/rollout-backends.md): SGLang's
// /generate body (meta_info.output_token_logprobs as [logprob, id, text] triples, finish_reason
// {"type": ...}, weight_version) and an OpenAI-style /v1/completions body (logprobs.tokens as
// "token_id:N", token_logprobs, finish_reason). A body that is not the API's shape, or whose ids
// and log-probs do not pair up as finite log-probabilities, is refused with the reason; nothing
// throws. Private to src/rollout; tests/rollout/test_backend_responses.cpp checks it on the
// published examples and on mutations of them.
#include <optional>
#include <string>

#include "astraflow/rollout/generation.hpp"

namespace astraflow::rollout_detail {

// One try at a request: the generation, or what went wrong and whether sending it again could help.
struct Attempt {
  std::optional<Generation> generation;
  // An aborted request's tokens (SGLang's finish_reason abort, vLLM's "abort") made before the abort (a pause with mode
  // abort around a weight update), with their log-probs and the version that made them: the request resumes from them
  // (prompt + these tokens) instead of starting over.
  std::optional<Generation> partial;
  std::string error;
  bool retryable = true;
  enum class Kind { None, Transport, Http, Malformed } kind = Kind::None;
  // Prompt positions the server took from its prefix cache, where it says (SGLang's
  // meta_info.cached_tokens; vLLM's usage.prompt_tokens_details.cached_tokens, with
  // --enable-prompt-tokens-details): -1 when the answer does not say.
  std::int64_t cached_tokens = -1;
};

Attempt parseSglang(const std::string& body);
Attempt parseOpenai(const std::string& body);

}  // namespace astraflow::rollout_detail
