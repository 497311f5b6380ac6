// `astraflow init-model` and `export-hf` behind the CLI: the model presets, initModel (a random model and its
// tokenizer as a new Hugging Face folder) and exportHf (a checkpoint's or run's policy written as one).
#include "astraflow/run/hf_folders.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "astraflow/core/config.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/core/hf_model_config.hpp"
#include "astraflow/core/run_files.hpp"
#include "astraflow/io/h5.hpp"
#include "astraflow/model/checkpoint.hpp"
#include "astraflow/model/hf_weights.hpp"
#include "astraflow/model/model_builder.hpp"
#include "astraflow/rollout/hf_folder.hpp"
#include "astraflow/text/hf_tokenizer_files.hpp"
#include "astraflow/text/tokenizer.hpp"

namespace astraflow {

namespace {

ModelConfig sized(int d_model, int layers, int heads, int kv_heads, int head_dim, int ffn, int max_positions,
                  double rope_theta) {
  ModelConfig m;
  m.family = ModelFamily::Qwen3;
  m.vocab_size = 0;
  m.d_model = d_model;
  m.layers = layers;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = head_dim;
  m.ffn_hidden = ffn;
  m.max_position_embeddings = max_positions;
  m.max_seq_len = max_positions;
  m.tied_embeddings = true;
  m.rope_theta = rope_theta;
  m.rms_eps = 1e-6;
  return m;
}

void refuseExisting(const std::filesystem::path& folder, const char* command) {
  if (std::filesystem::exists(folder / "config.json")) {
    throw Error(fmt::format("{}: {} already holds a config.json; choose an empty folder", command, folder.string()));
  }
}

// The checkpoint file and policy `source` names (a file, or a run folder's newest checkpoint).
std::pair<std::filesystem::path, std::string> checkpointOf(const std::filesystem::path& source,
                                                           const std::string& policy) {
  if (!std::filesystem::is_directory(source)) return {source, policy};
  const auto config_path = source / "config.yaml";
  if (!std::filesystem::exists(config_path)) {
    throw Error(fmt::format("export-hf: {} is a folder without config.yaml (not a run folder)", source.string()));
  }
  const Config cfg = loadConfig(config_path.string());
  std::vector<std::string> names;
  for (const auto& p : cfg.policies) names.push_back(p.name);
  const std::string chosen = policy.empty() ? names.front() : policy;
  if (std::find(names.begin(), names.end(), chosen) == names.end()) {
    throw Error(fmt::format("export-hf: the run has no policy '{}'; it has {}", chosen, fmt::join(names, ", ")));
  }
  const auto version = newestCheckpoint(source, names);
  if (version < 0) throw Error(fmt::format("export-hf: {} holds no complete checkpoint yet", source.string()));
  return {trainerCheckpointPath(source, version, chosen), chosen};
}

}  // namespace

std::vector<std::string> modelPresetNames() { return {"tiny-qwen3", "qwen3-0.6b"}; }

ModelConfig modelPreset(const std::string& name) {
  if (name == "tiny-qwen3") return sized(64, 2, 4, 2, 16, 176, 2048, 1e6);
  if (name == "qwen3-0.6b") {
    ModelConfig m = sized(1024, 28, 16, 8, 128, 3072, 40960, 1e6);
    m.vocab_size = 151936;  // Qwen3's (its tokenizer has 151,669 ids)
    return m;
  }
  throw Error(fmt::format("init-model: unknown preset '{}'; allowed: {}", name, fmt::join(modelPresetNames(), ", ")));
}

InitModelResult initModel(const std::filesystem::path& folder, const InitModelOptions& o) {
  refuseExisting(folder, "init-model");
  ModelConfig m = o.model;
  if (m.heads <= 0 || m.kv_heads <= 0 || m.heads % m.kv_heads != 0) {
    throw Error(fmt::format("init-model: --kv-heads {} must divide --heads {}", m.kv_heads, m.heads));
  }
  if (m.headDim() <= 0 || m.headDim() % 2 != 0) {
    throw Error(fmt::format("init-model: head size {} must be even (rotary pairs)", m.headDim()));
  }
  std::filesystem::create_directories(folder);
  const HfTokenizerSummary tok =
      o.tokenizer.empty() ? writeByteLevelTokenizer(folder) : copyTokenizer(o.tokenizer, folder);
  if (m.vocab_size == 0) {
    m.vocab_size = (tok.vocab_size + 63) / 64 * 64;
  } else if (m.vocab_size < tok.vocab_size) {
    throw Error(fmt::format("init-model: --vocab-size {} is smaller than the tokenizer's {} ids", m.vocab_size,
                            tok.vocab_size));
  }
  if (m.max_position_embeddings <= 0) m.max_position_embeddings = m.max_seq_len;

  InitModelResult result;
  result.model = m;
  auto model = newPolicyModel(m, o.seed);
  result.parameters = model->parameterCount();
  result.files = writeHfWeights(*model, folder, o.bf16, o.max_shard_bytes);

  writeHfModelFiles(folder, m, o.bf16, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id);
  return result;
}

ExportHfResult exportHf(const std::filesystem::path& source, const std::filesystem::path& out,
                        const ExportHfOptions& o) {
  refuseExisting(out, "export-hf");
  ExportHfResult result;
  std::tie(result.checkpoint, result.policy) = checkpointOf(source, o.policy);
  const auto file = io::H5File::openReadOnly(result.checkpoint.string());
  if (!file.exists("policies")) {
    throw Error(fmt::format("export-hf: {} holds no /policies group (not an astraflow checkpoint)",
                            result.checkpoint.string()));
  }
  const auto policies = file.openGroup("policies").childNames();
  if (result.policy.empty()) {
    if (policies.size() != 1) {
      throw Error(fmt::format("export-hf: {} holds policies {}; choose one with --policy", result.checkpoint.string(),
                              fmt::join(policies, ", ")));
    }
    result.policy = policies.front();
  } else if (std::find(policies.begin(), policies.end(), result.policy) == policies.end()) {
    throw Error(fmt::format("export-hf: {} holds no policy '{}' (it has {})", result.checkpoint.string(), result.policy,
                            fmt::join(policies, ", ")));
  }
  if (file.hasAttribute("version")) result.version = file.readInt64Attribute("version");
  const auto group = file.openGroup("policies/" + result.policy);
  ModelConfig m = modelConfigOf(group);
  m.hf_path.clear();  // the weights come from the checkpoint, not the folder it started from
  auto model = newPolicyModel(m, 0);
  loadModelWeights(group, *model);
  if (m.max_position_embeddings <= 0) m.max_position_embeddings = m.max_seq_len;
  result.model = m;

  result.files = writeHfFolder(*model, m, out, o.bf16, o.max_shard_bytes, o.head);
  return result;
}

}  // namespace astraflow
