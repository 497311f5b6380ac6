// The parts of model_config.hpp that are not inline: device requests ("cpu", "cuda", "cuda:N"), the bf16 engine
// choice (cpuHasBf16Instructions, from /proc/cpuinfo) and parameterCount of a transformer's sizes.
#include "astraflow/core/model_config.hpp"

#include <charconv>
#include <fstream>
#include <sstream>

namespace astraflow {

bool cpuHasBf16Instructions() {
  static const bool has = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("flags", 0) != 0) continue;
      std::istringstream flags(line);
      for (std::string f; flags >> f;) {
        if (f == "avx512_bf16" || f == "amx_bf16") return true;
      }
      return false;
    }
    return false;
  }();
  return has;
}

bool ComputeOptions::engineBf16(std::int64_t parameters) const {
  if (precision != Precision::Auto || device.cuda()) return bf16();
  return parameters >= kCpuBf16EngineParams && cpuHasBf16Instructions();
}

std::string DeviceRequest::text() const {
  if (kind == DeviceKind::Cpu) return "cpu";
  return index < 0 ? "cuda" : "cuda:" + std::to_string(index);
}

bool parseDeviceRequest(const std::string& text, DeviceRequest& out) {
  if (text == "cpu") {
    out = {DeviceKind::Cpu, -1};
    return true;
  }
  if (text == "cuda") {
    out = {DeviceKind::Cuda, -1};
    return true;
  }
  constexpr std::string_view prefix = "cuda:";
  if (text.size() <= prefix.size() || text.compare(0, prefix.size(), prefix) != 0) return false;
  int index = -1;
  const char* first = text.data() + prefix.size();
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(first, last, index);
  if (ec != std::errc() || end != last || index < 0 || index > 1023) return false;
  out = {DeviceKind::Cuda, index};
  return true;
}

std::int64_t parameterCount(const ModelConfig& m, std::int64_t vocab) {
  const std::int64_t V = m.vocab_size > 0 ? m.vocab_size : vocab, D = m.d_model, F = m.ffn_hidden;
  const std::int64_t q = static_cast<std::int64_t>(m.heads) * m.headDim(),
                     kv = static_cast<std::int64_t>(m.kv_heads) * m.headDim();
  std::int64_t layer = 2 * D;           // attention and MLP norms
  layer += D * q + 2 * D * kv + q * D;  // q, k, v, o
  if (m.qkvBias()) layer += q + 2 * kv;
  if (m.oBias()) layer += D;
  if (m.qkNorm()) layer += 2 * m.headDim();  // Qwen3's per-head q/k norms
  layer += 3 * D * F;                        // gate, up, down
  if (m.mlp_bias) layer += 2 * F + D;
  return V * D + m.layers * layer + D + (m.tied_embeddings ? 0 : V * D);
}

}  // namespace astraflow
