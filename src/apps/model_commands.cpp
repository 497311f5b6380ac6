// `astraflow init-model`, `export-hf` and `export-gguf`: their CLI options, and the calls that write a new random
// Hugging Face folder, or a checkpoint's or run's policy as a Hugging Face folder or a GGUF file.
#include "apps/model_commands.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <memory>

#include "astraflow/core/error.hpp"
#include "astraflow/run/gguf_export.hpp"
#include "astraflow/run/hf_folders.hpp"

namespace astraflow {

// What the user typed for init-model; sizes left at 0 / unset keep the preset's.
struct InitModelArgs {
  std::string folder;
  std::string preset = "tiny-qwen3";
  std::string architecture;
  int hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0, max_positions = 0;
  double rope_theta = 0;
  std::string tie;  // "", "true", "false"
  bool attention_bias = false;
  std::string tokenizer;
  std::string dtype = "float32";
  std::uint64_t seed = 0;
  std::uint64_t max_shard_bytes = 5'000'000'000;
};

struct ExportHfArgs {
  std::string source;
  std::string folder;
  std::string policy;
  std::string dtype = "float32";
  std::uint64_t max_shard_bytes = 5'000'000'000;
  bool untied = false;
};

struct ExportGgufArgs {
  std::string source;
  std::string file;
  std::string policy;
  std::string dtype = "f16";
};

namespace {

std::string fileList(const std::vector<std::filesystem::path>& paths) {
  std::vector<std::string> names;
  for (const auto& f : paths) names.push_back(fmt::format("\"{}\"", f.filename().string()));
  return fmt::format("{}", fmt::join(names, ", "));
}

int exportHfCommand(const ExportHfArgs& a) {
  try {
    ExportHfOptions o;
    o.policy = a.policy;
    o.bf16 = a.dtype == "bfloat16";
    o.max_shard_bytes = a.max_shard_bytes;
    o.head = a.untied ? HfHead::Separate : HfHead::AsModel;
    const auto r = exportHf(a.source, a.folder, o);
    std::printf(
        "{\"folder\": \"%s\", \"checkpoint\": \"%s\", \"policy\": \"%s\", \"version\": %lld, "
        "\"architecture\": \"%s\", \"files\": [%s]}\n",
        a.folder.c_str(), r.checkpoint.string().c_str(), r.policy.c_str(), static_cast<long long>(r.version),
        familyArchitecture(r.model.family), fileList(r.files).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 2;
  }
}

int exportGgufCommand(const ExportGgufArgs& a) {
  try {
    GgufExportOptions o;
    o.dtype = a.dtype;
    o.policy = a.policy;
    const auto r = exportGguf(a.source, a.file, o);
    std::printf("{\"file\": \"%s\", \"architecture\": \"%s\", \"tensors\": %zu, \"tokens\": %zu, \"dtype\": \"%s\"}\n",
                a.file.c_str(), r.architecture.c_str(), r.tensors, r.tokens, a.dtype.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 2;
  }
}

int initModelCommand(const InitModelArgs& a) {
  try {
    InitModelOptions o;
    o.model = modelPreset(a.preset);
    ModelConfig& m = o.model;
    if (a.architecture == "qwen2") m.family = ModelFamily::Qwen2;
    if (a.architecture == "llama") m.family = ModelFamily::Llama;
    auto set = [](int value, int& field) {
      if (value > 0) field = value;
    };
    set(a.hidden, m.d_model);
    set(a.layers, m.layers);
    set(a.heads, m.heads);
    set(a.kv_heads, m.kv_heads);
    set(a.head_dim, m.head_dim);
    set(a.ffn, m.ffn_hidden);
    set(a.vocab, m.vocab_size);
    set(a.max_positions, m.max_position_embeddings);
    m.max_seq_len = m.max_position_embeddings;
    if (a.rope_theta > 0) m.rope_theta = a.rope_theta;
    if (!a.tie.empty()) m.tied_embeddings = a.tie == "true";
    m.attention_bias = a.attention_bias;
    o.tokenizer = a.tokenizer;
    o.bf16 = a.dtype == "bfloat16";
    o.seed = a.seed;
    o.max_shard_bytes = a.max_shard_bytes;
    const auto r = initModel(a.folder, o);
    std::printf(
        "{\"folder\": \"%s\", \"architecture\": \"%s\", \"parameters\": %lld, \"vocab_size\": %d, "
        "\"files\": [%s]}\n",
        a.folder.c_str(), familyArchitecture(r.model.family), static_cast<long long>(r.parameters), r.model.vocab_size,
        fileList(r.files).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "astraflow: %s\n", e.what());
    return 2;
  }
}

}  // namespace

ModelCommands addModelCommands(CLI::App& app) {
  ModelCommands c;
  c.init_args = std::make_shared<InitModelArgs>();
  InitModelArgs& a = *c.init_args;
  auto* cmd = app.add_subcommand("init-model", "write a new randomly initialised Hugging Face model folder");
  cmd->add_option("folder", a.folder, "the folder to create (must not hold a config.json)")->required();
  cmd->add_option("--preset", a.preset, "tiny-qwen3 (default) or qwen3-0.6b")->check(CLI::IsMember(modelPresetNames()));
  cmd->add_option("--architecture", a.architecture, "qwen3 (the presets'), qwen2 or llama")
      ->check(CLI::IsMember({"qwen3", "qwen2", "llama"}));
  cmd->add_option("--hidden-size", a.hidden, "hidden size")->check(CLI::Range(8, 1 << 16));
  cmd->add_option("--layers", a.layers, "decoder blocks")->check(CLI::Range(1, 512));
  cmd->add_option("--heads", a.heads, "query heads")->check(CLI::Range(1, 1024));
  cmd->add_option("--kv-heads", a.kv_heads, "key/value heads (divides --heads)")->check(CLI::Range(1, 1024));
  cmd->add_option("--head-dim", a.head_dim, "per-head size (even)")->check(CLI::Range(2, 4096));
  cmd->add_option("--intermediate-size", a.ffn, "SwiGLU inner size")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--vocab-size", a.vocab, "vocabulary (default: the tokenizer's, rounded up to 64)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--max-positions", a.max_positions, "max_position_embeddings")->check(CLI::Range(8, 1 << 24));
  cmd->add_option("--rope-theta", a.rope_theta, "rotary base")->check(CLI::Range(1.0, 1e12));
  cmd->add_option("--tie-embeddings", a.tie, "true or false (presets: true)")->check(CLI::IsMember({"true", "false"}));
  cmd->add_flag("--attention-bias", a.attention_bias, "q/k/v/o biases (Qwen3, Llama; Qwen2 always has q/k/v ones)");
  cmd->add_option("--tokenizer", a.tokenizer,
                  "a tokenizer.json to copy (with the tokenizer_config.json beside it); default: byte-level, no "
                  "merges, ChatML special tokens")
      ->check(CLI::ExistingFile);
  cmd->add_option("--dtype", a.dtype, "weights in the files: float32 (default) or bfloat16")
      ->check(CLI::IsMember({"float32", "bfloat16"}));
  cmd->add_option("--seed", a.seed, "seed of the random weights");
  cmd->add_option("--max-shard-bytes", a.max_shard_bytes, "shard the weights past this size (default 5 GB)")
      ->check(CLI::Range(std::uint64_t{1} << 20, std::uint64_t{1} << 40));
  c.init_model = cmd;

  c.export_args = std::make_shared<ExportHfArgs>();
  ExportHfArgs& e = *c.export_args;
  auto* ex = app.add_subcommand("export-hf", "write a policy of a checkpoint or run as a Hugging Face model folder");
  ex->add_option("source", e.source, "a checkpoint .h5 (sft.h5, checkpoints/step_V.<policy>.h5) or a run folder")
      ->required()
      ->check(CLI::ExistingPath);
  ex->add_option("folder", e.folder, "the folder to write (must not hold a config.json)")->required();
  ex->add_option("--policy", e.policy, "which policy (default: the only one, or a run's first)");
  ex->add_option("--dtype", e.dtype, "weights in the files: float32 (default) or bfloat16")
      ->check(CLI::IsMember({"float32", "bfloat16"}));
  ex->add_option("--max-shard-bytes", e.max_shard_bytes, "shard the weights past this size (default 5 GB)")
      ->check(CLI::Range(std::uint64_t{1} << 20, std::uint64_t{1} << 40));
  ex->add_flag("--untied", e.untied,
               "a model with tied embeddings written with lm_head.weight of its own and config.json untied: the "
               "folder to start a vLLM server of an `api: vllm` pool from (docs/rollout-backends.md)");
  c.export_hf = ex;

  c.gguf_args = std::make_shared<ExportGgufArgs>();
  ExportGgufArgs& g = *c.gguf_args;
  auto* gg = app.add_subcommand(
      "export-gguf", "write a Hugging Face folder, checkpoint or run as one GGUF file for llama.cpp / Ollama");
  gg->add_option("source", g.source,
                 "a Hugging Face folder (config.json, safetensors, tokenizer.json), a checkpoint or a run")
      ->required()
      ->check(CLI::ExistingPath);
  gg->add_option("file", g.file, "the .gguf file to write")->required();
  gg->add_option("--dtype", g.dtype, "matrices as f16 (default), bf16 or f32; norms and biases stay f32")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  gg->add_option("--policy", g.policy, "for a checkpoint or run: which policy");
  c.export_gguf = gg;
  return c;
}

int ModelCommands::run() const {
  if (init_model && *init_model) return initModelCommand(*init_args);
  if (export_hf && *export_hf) return exportHfCommand(*export_args);
  if (export_gguf && *export_gguf) return exportGgufCommand(*gguf_args);
  return -1;
}

}  // namespace astraflow
