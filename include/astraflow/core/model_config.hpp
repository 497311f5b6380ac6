#pragma once
// Sizes of the policy transformer (config key policies[i].model). No LibTorch here, so the
// config parser and the layout code stay cheap to compile.
#include <cstdint>
#include <string>

namespace astraflow {

// What a model needs of its tokenizer: the vocabulary size, and the ids it must never generate.
struct TokenSpec {
  std::int32_t vocab_size = 0;
  std::int32_t pad_id = 0;
  std::int32_t bos_id = 0;
};

// How attention is computed (model.attention): `sdpa` through at::scaled_dot_product_attention
// (LibTorch picks a fused kernel per device), `eager` the explicit matmul–softmax–matmul it
// replaced, kept as the reference the tests compare with (Hugging Face's attn_implementation).
enum class AttentionKind { Sdpa, Eager };

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
  AttentionKind attention = AttentionKind::Sdpa;

  int headDim() const { return head_dim > 0 ? head_dim : d_model / heads; }
};

// Where a role's model runs (trainer.device, rollout.device): `cpu`, `cuda` (the GPU of this
// rank's node-local slot) or `cuda:N`.
enum class DeviceKind { Cpu, Cuda };
struct DeviceRequest {
  DeviceKind kind = DeviceKind::Cpu;
  int index = -1;  // cuda:N; -1 = picked from the rank's node-local slot
  std::string text() const;
  bool cuda() const { return kind == DeviceKind::Cuda; }
};
// Parses "cpu", "cuda", "cuda:N"; false (and `out` untouched) for anything else.
bool parseDeviceRequest(const std::string& text, DeviceRequest& out);

// The compute dtype (trainer.precision, rollout.precision): `auto` is bf16 on CUDA and fp32
// on the CPU. The trainer keeps fp32 master weights and AdamW state whatever this says.
enum class Precision { Auto, Fp32, Bf16 };

struct ComputeOptions {
  DeviceRequest device;
  Precision precision = Precision::Auto;
  // bf16 when asked, or when `auto` on CUDA.
  bool bf16() const { return precision == Precision::Bf16 || (precision == Precision::Auto && device.cuda()); }
};

}  // namespace astraflow
