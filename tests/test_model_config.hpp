#pragma once
// Small policy sizes for unit tests (each test states the sizes it relies on).
#include "astraflow/core/model_config.hpp"

namespace astraflow::test_support {

inline ModelConfig tinyModel(int vocab, int d_model, int layers, int heads, int kv_heads, int ffn, int max_seq_len) {
  ModelConfig m;
  m.vocab_size = vocab;
  m.d_model = d_model;
  m.layers = layers;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.ffn_hidden = ffn;
  m.max_seq_len = max_seq_len;
  return m;
}

}  // namespace astraflow::test_support
