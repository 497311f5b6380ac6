// writeHfFolder / writeHfModelFiles: a policy written as a Hugging Face folder (safetensors, config.json,
// generation_config.json, its tokenizer), for `export-hf` and for the servers of http rollout pools.
#include "astraflow/rollout/hf_folder.hpp"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "astraflow/core/error.hpp"
#include "astraflow/core/hf_model_config.hpp"
#include "astraflow/model/hf_weights.hpp"
#include "astraflow/text/hf_tokenizer_files.hpp"
#include "astraflow/text/tokenizer.hpp"

namespace astraflow {

std::vector<std::filesystem::path> writeHfFolder(const PolicyModelImpl& model, ModelConfig m,
                                                 const std::filesystem::path& folder, bool bf16,
                                                 std::uint64_t max_shard_bytes, HfHead head) {
  if (m.max_position_embeddings <= 0) m.max_position_embeddings = m.max_seq_len;
  const std::filesystem::path tokenizer_json = std::filesystem::path(m.tokenizer_folder) / "tokenizer.json";
  if (!m.tokenizer_folder.empty() && !std::filesystem::exists(tokenizer_json))
    throw Error(fmt::format("the policy's ids come from the tokenizer of {}, which is gone; restore the folder",
                            tokenizer_json.string()));
  std::filesystem::create_directories(folder);
  auto files = writeHfWeights(model, folder, bf16, max_shard_bytes, head);
  if (head == HfHead::Separate) m.tied_embeddings = false;
  const HfTokenizerSummary tok = m.tokenizer_folder.empty() ? writeTaskTokenizer(*makeTaskTokenizer(), folder)
                                                            : copyTokenizer(tokenizer_json, folder);
  writeHfModelFiles(folder, m, bf16, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id);
  return files;
}

void writeHfModelFiles(const std::filesystem::path& folder, const ModelConfig& m, bool bf16, int bos_id, int eos_id,
                       int pad_id) {
  const std::vector<int> eos_ids = eos_id >= 0 ? std::vector<int>{eos_id} : std::vector<int>{};
  {
    std::ofstream out(folder / "config.json");
    out << hfConfigJson(m, bf16 ? "bfloat16" : "float32", bos_id, pad_id, eos_ids);
    if (!out) throw Error(fmt::format("{} cannot be written", (folder / "config.json").string()));
  }
  const auto id = [](int v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  const nlohmann::json generation = {
      {"bos_token_id", id(bos_id)}, {"eos_token_id", id(eos_id)}, {"pad_token_id", id(pad_id)}};
  std::ofstream out(folder / "generation_config.json");
  out << generation.dump(2) << "\n";
  if (!out) throw Error(fmt::format("{} cannot be written", (folder / "generation_config.json").string()));
}

}  // namespace astraflow
