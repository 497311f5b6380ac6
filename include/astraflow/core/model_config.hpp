#pragma once
// Sizes of the policy transformer (config key policies[i].model). No LibTorch here, so the
// config parser and the layout code stay cheap to compile.
#include <array>
#include <cstdint>
#include <string>

#include "astraflow/core/enum_names.hpp"

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
inline constexpr std::array<EnumName<AttentionKind>, 2> kAttentionKindNames{
    {{"sdpa", AttentionKind::Sdpa}, {"eager", AttentionKind::Eager}}};

// The Hugging Face architecture the decoder block follows. They share RMSNorm, rotary
// embeddings, grouped-query attention and the SwiGLU MLP, and differ in biases and q/k norm:
// Qwen3 normalises each query/key head (q_norm, k_norm); Qwen2 has q/k/v biases; Llama has
// neither, unless its config asks for attention/MLP biases. A model set by sizes in the config
// is a Qwen3 block.
enum class ModelFamily { Qwen3, Qwen2, Llama };
const char* familyArchitecture(ModelFamily family);  // "Qwen3ForCausalLM", …

// Rotary frequency scaling (config.json `rope_parameters.rope_type` / legacy `rope_scaling`):
// the types astraflow computes exactly as `transformers` does. Others are refused by name.
struct RopeScaling {
  enum class Kind { None, Linear, Llama3 };
  Kind kind = Kind::None;
  double factor = 1.0;
  double low_freq_factor = 1.0;              // llama3
  double high_freq_factor = 4.0;             // llama3
  int original_max_position_embeddings = 0;  // llama3
};

// "default", "linear", "llama3": transformers' rope_type names.
const char* ropeTypeName(RopeScaling::Kind kind);

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
  ModelFamily family = ModelFamily::Qwen3;
  bool attention_bias = false;  // Qwen3/Llama `attention_bias`: q, k, v and o projections
  bool mlp_bias = false;        // Llama `mlp_bias`: gate, up and down projections
  RopeScaling rope_scaling;
  int max_position_embeddings = 0;  // config.json's (0: a model set by sizes); bounds max_seq_len
  // The Hugging Face folder (policies[i].model.hf) the sizes came from and the weights load from;
  // empty for a model set by sizes and initialised from the seed.
  std::string hf_path;
  // The folder whose tokenizer.json gave the policy's token ids (the dataset environments encode
  // with the first policy's folder); empty: the built-in task vocabulary. Checkpoints keep it, so
  // export-hf writes the tokenizer the policy was trained with.
  std::string tokenizer_folder;

  int headDim() const { return head_dim > 0 ? head_dim : d_model / heads; }
  bool qkNorm() const { return family == ModelFamily::Qwen3; }
  bool qkvBias() const { return family == ModelFamily::Qwen2 || attention_bias; }
  bool oBias() const { return family != ModelFamily::Qwen2 && attention_bias; }
};

// Parameters of a model of these sizes (PolicyModelImpl::parameterCount without building it; the
// memory plan's unit). `vocab` stands in for vocab_size when that is 0 (taken from the tokenizer).
std::int64_t parameterCount(const ModelConfig& m, std::int64_t vocab = 0);

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
inline constexpr std::array<EnumName<Precision>, 3> kPrecisionNames{
    {{"auto", Precision::Auto}, {"fp32", Precision::Fp32}, {"bf16", Precision::Bf16}}};

struct ComputeOptions {
  DeviceRequest device;
  Precision precision = Precision::Auto;
  // LibTorch/OpenBLAS threads of this role's ranks (trainer.threads, rollout.threads); 0: the
  // run.threads_per_rank rule. A trainer that works while its rollout ranks mostly wait gains
  // from more threads than an even split of the node's cores gives it (docs/configuration.md).
  int threads = 0;
  // bf16 when asked, or when `auto` on CUDA.
  bool bf16() const { return precision == Precision::Bf16 || (precision == Precision::Auto && device.cuda()); }
  // A generation engine's dtype (rollout.precision): bf16() or, for `auto` on a CPU with bf16
  // instructions (AVX-512 BF16 or AMX), a model of at least kCpuBf16EngineParams parameters —
  // measured 2.6-2.8x fp32's tokens/s at the Qwen3-0.6B shape, 0.3x at the quickstart's size
  // (docs/performance.md); such an engine also computes from its node's shared copy in place.
  bool engineBf16(std::int64_t parameters) const;
  static constexpr std::int64_t kCpuBf16EngineParams = 100'000'000;
};

// This CPU has bf16 dot-product instructions (/proc/cpuinfo: avx512_bf16 or amx_bf16).
bool cpuHasBf16Instructions();

}  // namespace astraflow
