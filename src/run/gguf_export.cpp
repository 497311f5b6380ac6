// exportGguf: a Hugging Face folder (or a checkpoint or run, exported to one first) as a GGUF file for llama.cpp tools:
// its metadata keys and tensor names, Llama's q/k rows permuted, and the byte-level BPE tokenizer.
#include "astraflow/run/gguf_export.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "astraflow/core/error.hpp"
#include "astraflow/core/hf_model_config.hpp"
#include "astraflow/core/text_pattern.hpp"
#include "astraflow/io/gguf_writer.hpp"
#include "astraflow/io/safetensors.hpp"
#include "astraflow/run/hf_folders.hpp"
#include "astraflow/text/bpe_vocabulary.hpp"

namespace astraflow {
namespace {

using io::GgufTensorType;
using io::StDtype;
using io::StTensorView;

float toFloat(const StTensorView& t, std::int64_t i) {
  const std::byte* p = t.bytes.data();
  if (t.dtype == StDtype::F32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  if (t.dtype == StDtype::BF16) return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
  // IEEE half → float
  const std::uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  if (exponent == 0) return (sign ? -1.f : 1.f) * std::ldexp(static_cast<float>(mantissa), -24);
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

std::uint16_t toBf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  return static_cast<std::uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);  // round to nearest even
}

std::uint16_t toF16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (u >> 16) & 0x8000;
  const float a = std::fabs(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>(sign | 0x7E00);
  if (a >= 65520.f) return static_cast<std::uint16_t>(sign | 0x7C00);  // rounds past the largest half
  if (a < 6.103515625e-05f) {                                          // subnormal halves: steps of 2^-24
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(a * 16777216.f)));
  }
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(a);
  const std::uint32_t rounded = bits + 0xFFF + ((bits >> 13) & 1);  // round the 13 dropped bits to even
  return static_cast<std::uint16_t>(sign | (((rounded >> 23) - 112) << 10) | ((rounded >> 13) & 0x3FF));
}

// Row order of llama.cpp's rotary layout for Llama's q/k projections: Hugging Face keeps the
// two rotated halves of each head apart, llama.cpp interleaves them (convert_hf_to_gguf's
// permute): new row h·d + 2i + j is old row h·d + j·d/2 + i.
std::int64_t permutedRow(std::int64_t row, std::int64_t head_dim) {
  const std::int64_t h = row / head_dim, r = row % head_dim, i = r / 2, j = r % 2;
  return h * head_dim + j * (head_dim / 2) + i;
}

// Llama-3 rotary scaling as llama.cpp takes it: a factor per frequency (rope_freqs.weight) that
// divides it, computed as its converter does (float32 frequencies; factor 1 for short
// wavelengths, `factor` for long ones, a smooth blend between) — the same scaled frequencies as
// transformers' llama3 rope.
std::vector<float> llama3RopeFactors(const ModelConfig& m) {
  const RopeScaling& r = m.rope_scaling;
  const int dim = m.headDim();
  const float old_context = static_cast<float>(r.original_max_position_embeddings);
  const float low_wavelen = old_context / static_cast<float>(r.low_freq_factor);
  const float high_wavelen = old_context / static_cast<float>(r.high_freq_factor);
  std::vector<float> factors;
  for (int i = 0; i < dim; i += 2) {
    const float freq =
        1.0f / std::pow(static_cast<float>(m.rope_theta), static_cast<float>(i) / static_cast<float>(dim));
    const float wavelen = static_cast<float>(2 * M_PI) / freq;
    if (wavelen < high_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(static_cast<float>(r.factor));
    } else {
      const float smooth = (old_context / wavelen - static_cast<float>(r.low_freq_factor)) /
                           static_cast<float>(r.high_freq_factor - r.low_freq_factor);
      factors.push_back(1.0f / ((1.0f - smooth) / static_cast<float>(r.factor) + smooth));
    }
  }
  return factors;
}

struct TensorName {
  std::string gguf;
  int permute_heads = 0;  // Llama q/k: the heads whose rows are permuted
};

TensorName ggufName(const std::string& hf, const ModelConfig& m) {
  static const TextPattern layer(R"(model\.layers\.(\d+)\.(.+)\.(weight|bias))", "GGUF export");
  if (hf == "model.embed_tokens.weight") return {"token_embd.weight"};
  if (hf == "model.norm.weight") return {"output_norm.weight"};
  if (hf == "lm_head.weight") return {"output.weight"};
  const auto found = layer.fullMatch(hf);
  if (!found) throw Error(fmt::format("GGUF export: no GGUF name for tensor {}", hf));
  const std::string block(*found->groups[0]), part(*found->groups[1]), kind(*found->groups[2]);
  static const std::pair<const char*, const char*> kParts[] = {
      {"input_layernorm", "attn_norm"},    {"self_attn.q_proj", "attn_q"},
      {"self_attn.k_proj", "attn_k"},      {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"}, {"self_attn.q_norm", "attn_q_norm"},
      {"self_attn.k_norm", "attn_k_norm"}, {"post_attention_layernorm", "ffn_norm"},
      {"mlp.gate_proj", "ffn_gate"},       {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"}};
  for (const auto& [from, to] : kParts) {
    if (part != from) continue;
    TensorName n{fmt::format("blk.{}.{}.{}", block, to, kind)};
    if (m.family == ModelFamily::Llama && part == "self_attn.q_proj") n.permute_heads = m.heads;
    if (m.family == ModelFamily::Llama && part == "self_attn.k_proj") n.permute_heads = m.kv_heads;
    return n;
  }
  throw Error(fmt::format("GGUF export: no GGUF name for tensor {}", hf));
}

const char* architectureOf(ModelFamily f) {
  switch (f) {
    case ModelFamily::Qwen3: return "qwen3";
    case ModelFamily::Qwen2: return "qwen2";
    case ModelFamily::Llama: return "llama";
  }
  return "";
}

void writeMetadata(io::GgufWriter& w, const ModelConfig& m, const std::string& arch, GgufTensorType type) {
  w.setString("general.architecture", arch);
  w.setString("general.name", std::filesystem::path(m.hf_path).filename().string());
  w.setU32("general.file_type", type == GgufTensorType::F32 ? 0 : type == GgufTensorType::F16 ? 1 : 32);
  const std::string p = arch + ".";
  w.setU32(p + "context_length", static_cast<std::uint32_t>(m.max_position_embeddings));
  w.setU32(p + "embedding_length", static_cast<std::uint32_t>(m.d_model));
  w.setU32(p + "block_count", static_cast<std::uint32_t>(m.layers));
  w.setU32(p + "feed_forward_length", static_cast<std::uint32_t>(m.ffn_hidden));
  w.setU32(p + "attention.head_count", static_cast<std::uint32_t>(m.heads));
  w.setU32(p + "attention.head_count_kv", static_cast<std::uint32_t>(m.kv_heads));
  w.setU32(p + "attention.key_length", static_cast<std::uint32_t>(m.headDim()));
  w.setU32(p + "attention.value_length", static_cast<std::uint32_t>(m.headDim()));
  w.setU32(p + "rope.dimension_count", static_cast<std::uint32_t>(m.headDim()));
  w.setF32(p + "attention.layer_norm_rms_epsilon", static_cast<float>(m.rms_eps));
  w.setF32(p + "rope.freq_base", static_cast<float>(m.rope_theta));
  w.setU32(p + "vocab_size", static_cast<std::uint32_t>(m.vocab_size));
  if (m.rope_scaling.kind == RopeScaling::Kind::Linear) {
    w.setString(p + "rope.scaling.type", "linear");
    w.setF32(p + "rope.scaling.factor", static_cast<float>(m.rope_scaling.factor));
  }
}

void writeTokenizer(io::GgufWriter& w, const BpeVocabulary& v, const HfModelConfig& hf) {
  w.setString("tokenizer.ggml.model", "gpt2");
  w.setString("tokenizer.ggml.pre", v.pre);
  w.setStrings("tokenizer.ggml.tokens", v.tokens);
  std::vector<std::int32_t> kinds;
  for (TokenKind k : v.kinds) kinds.push_back(static_cast<std::int32_t>(k));
  w.setI32s("tokenizer.ggml.token_type", std::move(kinds));
  w.setStrings("tokenizer.ggml.merges", v.merges);
  if (hf.bos_token_id >= 0) w.setU32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(hf.bos_token_id));
  if (!hf.eos_token_ids.empty())
    w.setU32("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(hf.eos_token_ids[0]));
  if (hf.pad_token_id >= 0) w.setU32("tokenizer.ggml.padding_token_id", static_cast<std::uint32_t>(hf.pad_token_id));
  w.setBool("tokenizer.ggml.add_bos_token", v.add_bos);
  if (!v.chat_template.empty()) w.setString("tokenizer.chat_template", v.chat_template);
}

GgufExportResult writeFolder(const std::filesystem::path& folder, const std::filesystem::path& out,
                             GgufTensorType type) {
  const HfModelConfig hf = readHfModelConfig(folder.string());
  const ModelConfig& m = hf.model;
  if (m.rope_scaling.kind == RopeScaling::Kind::Llama3 && m.family != ModelFamily::Llama)
    throw Error("GGUF export: rope_type 'llama3' is read by llama.cpp's Llama graph only");
  if (m.mlp_bias) throw Error("GGUF export: mlp_bias is not supported by llama.cpp's Llama graph");
  const std::string arch = architectureOf(m.family);
  const BpeVocabulary vocabulary = readBpeVocabulary(folder, m.vocab_size);

  io::GgufWriter w;
  writeMetadata(w, m, arch, type);
  writeTokenizer(w, vocabulary, hf);
  const auto checkpoint = io::SafetensorsCheckpoint::open(folder);
  for (const StTensorView* t : checkpoint.tensors()) {
    const TensorName name = ggufName(t->name, m);
    // Norms and biases stay f32, as llama.cpp's converter keeps them.
    const GgufTensorType tensor_type = t->shape.size() == 1 ? GgufTensorType::F32 : type;
    const std::int64_t rows = t->shape.empty() ? 1 : t->shape[0];
    const std::int64_t cols = rows == 0 ? 0 : t->numel() / rows;
    w.addTensor(name.gguf, t->shape, tensor_type,
                [t, name, tensor_type, rows, cols, &m, &checkpoint](std::string& bytes) {
                  bytes.reserve(static_cast<std::size_t>(t->numel()) * io::ggufTypeBytes(tensor_type));
                  for (std::int64_t r = 0; r < rows; ++r) {
                    const std::int64_t src = name.permute_heads ? permutedRow(r, m.headDim()) : r;
                    for (std::int64_t c = 0; c < cols; ++c) {
                      const float f = toFloat(*t, src * cols + c);
                      if (tensor_type == GgufTensorType::F32) {
                        bytes.append(reinterpret_cast<const char*>(&f), 4);
                      } else {
                        const std::uint16_t h = tensor_type == GgufTensorType::BF16 ? toBf16(f) : toF16(f);
                        bytes.append(reinterpret_cast<const char*>(&h), 2);
                      }
                    }
                  }
                  checkpoint.releasePages(*t);
                });
  }
  if (m.rope_scaling.kind == RopeScaling::Kind::Llama3) {
    const std::vector<float> factors = llama3RopeFactors(m);
    w.addTensor("rope_freqs.weight", {static_cast<std::int64_t>(factors.size())}, GgufTensorType::F32,
                [factors](std::string& bytes) {
                  bytes.append(reinterpret_cast<const char*>(factors.data()), 4 * factors.size());
                });
  }
  w.write(out);
  return {arch, m, w.tensorCount(), vocabulary.tokens.size()};
}

}  // namespace

GgufExportResult exportGguf(const std::filesystem::path& source, const std::filesystem::path& out,
                            const GgufExportOptions& options) {
  GgufTensorType type = GgufTensorType::F16;
  if (options.dtype == "f32")
    type = GgufTensorType::F32;
  else if (options.dtype == "bf16")
    type = GgufTensorType::BF16;
  else if (options.dtype != "f16")
    throw Error(fmt::format("GGUF export: dtype '{}' (allowed: f32, f16, bf16)", options.dtype));
  if (std::filesystem::exists(source / "config.json")) return writeFolder(source, out, type);
  // A checkpoint or run: through a float32 Hugging Face folder beside the output, removed after.
  const std::filesystem::path tmp = out.string() + ".hf.tmp";
  std::filesystem::remove_all(tmp);
  ExportHfOptions hf;
  hf.policy = options.policy;
  exportHf(source, tmp, hf);
  try {
    GgufExportResult r = writeFolder(tmp, out, type);
    std::filesystem::remove_all(tmp);
    return r;
  } catch (...) {
    std::filesystem::remove_all(tmp);
    throw;
  }
}

}  // namespace astraflow
