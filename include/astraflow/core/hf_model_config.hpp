#pragma once
// A Hugging Face model folder's config.json as a ModelConfig (policies[i].model.hf). Only the
// architectures whose maths astraflow's block computes are taken, and every config.json field
// that changes the maths is either computed or refused by name; nothing is approximated.
#include <string>
#include <vector>

#include "astraflow/core/model_config.hpp"

namespace astraflow {

struct HfModelConfig {
  ModelConfig model;  // sizes, family, biases, rotary settings; hf_path = the folder
  // Token ids config.json names (-1 / empty when absent); generation_config.json may add more.
  int bos_token_id = -1;
  int pad_token_id = -1;
  std::vector<int> eos_token_ids;
  // Fields astraflow does not read and that do not change the forward pass as far as it knows
  // (for the caller to log, so nothing is dropped out of the user's sight).
  std::vector<std::string> unread_fields;
};

// Reads <folder>/config.json. Throws ConfigError naming the file and the field for a missing
// file, malformed JSON, an architecture other than Qwen3/Qwen2/LlamaForCausalLM, a rope type
// other than default/linear/llama3, sliding-window attention, an activation other than silu,
// quantisation, partial rotary embeddings, and sizes that do not fit together.
HfModelConfig readHfModelConfig(const std::string& folder);

// config.json text for `m` (init-model, export-hf): what `transformers` reads back as the same
// model. `dtype` is "float32" or "bfloat16", the weights' dtype.
std::string hfConfigJson(const ModelConfig& m, const std::string& dtype, int bos_token_id, int pad_token_id,
                         const std::vector<int>& eos_token_ids);

}  // namespace astraflow
