#pragma once
// Sizes of the policy transformer (config key policies[i].model). No LibTorch here, so the
// config parser and the layout code stay cheap to compile.
#include <cstdint>

namespace astraflow {

// What a model needs of its tokenizer: the vocabulary size, and the ids it must never generate.
struct TokenSpec {
  std::int32_t vocab_size = 0;
  std::int32_t pad_id = 0;
  std::int32_t bos_id = 0;
};

struct ModelConfig {
  int vocab_size = 0;    // 0 in config: taken from the tokenizer
  int d_model = 64;      // hidden size
  int layers = 2;        // decoder blocks
  int heads = 4;         // query heads
  int kv_heads = 2;      // key/value heads (grouped-query attention), divides heads
  int head_dim = 0;      // 0: d_model / heads
  int ffn_hidden = 176;  // SwiGLU inner size
  int max_seq_len = 64;  // longest context (prompt + generated + environment tokens)
  bool tied_embeddings = true;
  double rope_theta = 10000.0;
  double rms_eps = 1e-6;

  int headDim() const { return head_dim > 0 ? head_dim : d_model / heads; }
};

}  // namespace astraflow
