#pragma once
// `astraflow export-gguf`: a Hugging Face folder (or a checkpoint / run, exported to one first)
// as one GGUF file that llama.cpp-based tools (llama.cpp, Ollama, llama-cpp-python) load: the
// model's hyper-parameters under llama.cpp's keys, the weights under its tensor names (Llama's
// q/k rows permuted to its rotary layout), and the byte-level BPE tokenizer with its merges,
// special ids and chat template (docs/models.md).
#include <filesystem>
#include <string>

#include "astraflow/core/model_config.hpp"

namespace astraflow {

struct GgufExportOptions {
  std::string dtype = "f16";  // matrices as f32, f16 or bf16; norms and biases always f32
  std::string policy;         // for a checkpoint or run source: which policy
};

struct GgufExportResult {
  std::string architecture;  // general.architecture: qwen3, qwen2, llama
  ModelConfig model;
  std::size_t tensors = 0;
  std::size_t tokens = 0;
};

// Throws Error naming what cannot be written (llama3 rotary scaling outside the Llama family,
// MLP biases, a tokenizer that is not byte-level BPE); `out` is written atomically.
GgufExportResult exportGguf(const std::filesystem::path& source, const std::filesystem::path& out,
                            const GgufExportOptions& options);

}  // namespace astraflow
