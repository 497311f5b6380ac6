// Model weights in HDF5: saveModelWeights / loadModelWeights (one float32 dataset per parameter, with its shape),
// modelConfigOf from a policy group's attributes, and whole checkpoint files (saveCheckpointFile, loadCheckpointFile).
#include "astraflow/model/checkpoint.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <filesystem>
#include <functional>
#include <sstream>

#include "astraflow/core/error.hpp"

namespace astraflow {

namespace {

std::string shapeText(torch::IntArrayRef shape) { return fmt::format("{}", fmt::join(shape, ",")); }
std::string shapeText(const torch::Tensor& t) { return shapeText(t.sizes()); }

// "d0,d1,…" → dims; empty on malformed text, a non-positive or an absurd dimension.
std::vector<std::int64_t> parseShape(const std::string& text) {
  std::vector<std::int64_t> dims;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    std::int64_t d = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), d);
    if (ec != std::errc() || end != part.data() + part.size() || d <= 0 || d > (1ll << 31)) return {};
    dims.push_back(d);
  }
  return dims;
}

}  // namespace

void saveModelWeights(const io::H5Location& policy_group, const PolicyModelImpl& model) {
  const auto params = model.orderedParameters();
  saveModelWeights(policy_group, model, [&](std::size_t i) { return params[i].tensor; });
}

void saveModelWeights(const io::H5Location& policy_group, const PolicyModelImpl& model,
                      const std::function<torch::Tensor(std::size_t)>& value) {
  const ModelConfig& m = model.config();
  auto weights = policy_group.createGroup("weights");
  const auto params = model.orderedParameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto tensor = value(i).detach().view(model.parameterShape(i));
    const auto flat = tensor.to(torch::kCPU, torch::kFloat32).contiguous().view(-1);
    std::span<const float> values(flat.data_ptr<float>(), static_cast<std::size_t>(flat.numel()));
    auto ds = weights.writeVector(params[i].name, values);
    ds.writeAttribute("shape", shapeText(tensor));
  }
  policy_group.writeAttribute("vocab_size", std::int64_t{m.vocab_size});
  policy_group.writeAttribute("d_model", std::int64_t{m.d_model});
  policy_group.writeAttribute("layers", std::int64_t{m.layers});
  policy_group.writeAttribute("heads", std::int64_t{m.heads});
  policy_group.writeAttribute("kv_heads", std::int64_t{m.kv_heads});
  policy_group.writeAttribute("head_dim", std::int64_t{m.headDim()});
  policy_group.writeAttribute("ffn_hidden", std::int64_t{m.ffn_hidden});
  policy_group.writeAttribute("tied_embeddings", std::int64_t{m.tied_embeddings ? 1 : 0});
  policy_group.writeAttribute("max_seq_len", std::int64_t{m.max_seq_len});
  policy_group.writeAttribute("rope_theta", m.rope_theta);
  policy_group.writeAttribute("rms_eps", m.rms_eps);
  // What export-hf needs to write config.json from the checkpoint alone.
  policy_group.writeAttribute("architecture", std::string(familyArchitecture(m.family)));
  policy_group.writeAttribute("attention_bias", std::int64_t{m.attention_bias ? 1 : 0});
  policy_group.writeAttribute("mlp_bias", std::int64_t{m.mlp_bias ? 1 : 0});
  policy_group.writeAttribute("max_position_embeddings", std::int64_t{m.max_position_embeddings});
  policy_group.writeAttribute("rope_type", std::string(ropeTypeName(m.rope_scaling.kind)));
  policy_group.writeAttribute("rope_factor", m.rope_scaling.factor);
  policy_group.writeAttribute("rope_low_freq_factor", m.rope_scaling.low_freq_factor);
  policy_group.writeAttribute("rope_high_freq_factor", m.rope_scaling.high_freq_factor);
  policy_group.writeAttribute("rope_original_max_position_embeddings",
                              std::int64_t{m.rope_scaling.original_max_position_embeddings});
  policy_group.writeAttribute("hf_path", m.hf_path);
  policy_group.writeAttribute("tokenizer_folder", m.tokenizer_folder);
  policy_group.writeAttribute("parameter_order", fmt::format("{}", fmt::join(
                                                                       [&] {
                                                                         std::vector<std::string> names;
                                                                         for (const auto& p : model.orderedParameters())
                                                                           names.push_back(p.name);
                                                                         return names;
                                                                       }(),
                                                                       ",")));
}

void loadModelWeights(const io::H5Location& policy_group, PolicyModelImpl& model) {
  // Sizes that tensor shapes cannot reveal (heads vs head size, rotary base) must match too.
  const ModelConfig& m = model.config();
  auto checkInt = [&](const char* attr, std::int64_t want) {
    if (!policy_group.hasAttribute(attr)) return;
    const auto got = policy_group.readInt64Attribute(attr);
    if (got != want) {
      throw Error(fmt::format("checkpoint {}: model attribute '{}' is {} but the config's model has {}",
                              policy_group.fileName(), attr, got, want));
    }
  };
  if (policy_group.hasAttribute("architecture") &&
      policy_group.readStringAttribute("architecture") != familyArchitecture(m.family)) {
    throw Error(fmt::format("checkpoint {}: model attribute 'architecture' is {} but the config's model is {}",
                            policy_group.fileName(), policy_group.readStringAttribute("architecture"),
                            familyArchitecture(m.family)));
  }
  if (policy_group.hasAttribute("rope_type") &&
      policy_group.readStringAttribute("rope_type") != ropeTypeName(m.rope_scaling.kind)) {
    throw Error(fmt::format("checkpoint {}: model attribute 'rope_type' is {} but the config's model has {}",
                            policy_group.fileName(), policy_group.readStringAttribute("rope_type"),
                            ropeTypeName(m.rope_scaling.kind)));
  }
  checkInt("heads", m.heads);
  checkInt("kv_heads", m.kv_heads);
  checkInt("head_dim", m.headDim());
  if (policy_group.hasAttribute("rope_theta") && policy_group.readDoubleAttribute("rope_theta") != m.rope_theta) {
    throw Error(fmt::format("checkpoint {}: model attribute 'rope_theta' is {} but the config's model has {}",
                            policy_group.fileName(), policy_group.readDoubleAttribute("rope_theta"), m.rope_theta));
  }
  auto weights = policy_group.openGroup("weights");
  const auto params = model.orderedParameters();
  // One parameter's values at a time (the float vector read from the file, viewed in place).
  auto read = [&](std::size_t i, std::vector<float>& values) {
    const std::string& name = params[i].name;
    const auto shape = model.parameterShape(i);  // the full one, sharded or not
    if (!weights.exists(name)) {
      throw Error(fmt::format("checkpoint {}: tensor '{}' is missing (the config's model has it, shape [{}])",
                              weights.fileName(), name, shapeText(shape)));
    }
    auto ds = weights.openDataset(name);
    const auto dims = parseShape(ds.readStringAttribute("shape"));
    if (dims.empty() || !shape.equals(dims)) {
      throw Error(fmt::format("checkpoint {}: tensor '{}' has shape [{}] but the config's model expects [{}]",
                              weights.fileName(), name, ds.readStringAttribute("shape"), shapeText(shape)));
    }
    values = ds.readVector<float>();
    std::int64_t count = 1;
    for (auto d : dims) count *= d;
    if (count != static_cast<std::int64_t>(values.size())) {
      throw Error(fmt::format("checkpoint {}: tensor '{}' has shape [{}] but the config's model expects [{}]",
                              weights.fileName(), name, fmt::join(dims, ","), shapeText(shape)));
    }
    return torch::from_blob(values.data(), dims, torch::kFloat32);
  };
  // Two passes: every tensor is checked (name, shape, finite values) before any is copied, so a
  // refused checkpoint leaves the model untouched — without holding a second whole model (the
  // file is read twice instead; a 0.6B model's fp32 weights are 2.4 GB).
  std::vector<float> values;
  for (std::size_t i = 0; i < params.size(); ++i) PolicyModelImpl::checkFinite({params[i].name, read(i, values)});
  for (std::size_t i = 0; i < params.size(); ++i) model.copyInto(i, read(i, values));
}

ModelConfig modelConfigOf(const io::H5Location& g) {
  ModelConfig m;
  auto integer = [&](const char* attr) {
    if (!g.hasAttribute(attr)) {
      throw Error(fmt::format("checkpoint {}: model attribute '{}' is missing (written by an older astraflow?)",
                              g.fileName(), attr));
    }
    return static_cast<int>(g.readInt64Attribute(attr));
  };
  m.vocab_size = integer("vocab_size");
  m.d_model = integer("d_model");
  m.layers = integer("layers");
  m.heads = integer("heads");
  m.kv_heads = integer("kv_heads");
  m.head_dim = integer("head_dim");
  m.ffn_hidden = integer("ffn_hidden");
  m.tied_embeddings = integer("tied_embeddings") != 0;
  m.max_seq_len = integer("max_seq_len");
  m.rope_theta = g.readDoubleAttribute("rope_theta");
  m.rms_eps = g.readDoubleAttribute("rms_eps");
  const std::string arch = g.hasAttribute("architecture") ? g.readStringAttribute("architecture") : "";
  bool known = false;
  for (auto family : {ModelFamily::Qwen3, ModelFamily::Qwen2, ModelFamily::Llama}) {
    if (arch == familyArchitecture(family)) m.family = family, known = true;
  }
  if (!known) throw Error(fmt::format("checkpoint {}: model attribute 'architecture' is '{}'", g.fileName(), arch));
  m.attention_bias = integer("attention_bias") != 0;
  m.mlp_bias = integer("mlp_bias") != 0;
  m.max_position_embeddings = integer("max_position_embeddings");
  const std::string rope = g.readStringAttribute("rope_type");
  known = false;
  for (auto kind : {RopeScaling::Kind::None, RopeScaling::Kind::Linear, RopeScaling::Kind::Llama3}) {
    if (rope == ropeTypeName(kind)) m.rope_scaling.kind = kind, known = true;
  }
  if (!known) throw Error(fmt::format("checkpoint {}: model attribute 'rope_type' is '{}'", g.fileName(), rope));
  m.rope_scaling.factor = g.readDoubleAttribute("rope_factor");
  m.rope_scaling.low_freq_factor = g.readDoubleAttribute("rope_low_freq_factor");
  m.rope_scaling.high_freq_factor = g.readDoubleAttribute("rope_high_freq_factor");
  m.rope_scaling.original_max_position_embeddings = integer("rope_original_max_position_embeddings");
  m.hf_path = g.readStringAttribute("hf_path");
  // Absent in checkpoints written before it was kept: those runs encoded with the task vocabulary.
  if (g.hasAttribute("tokenizer_folder")) m.tokenizer_folder = g.readStringAttribute("tokenizer_folder");
  return m;
}

void saveCheckpointFile(const std::string& path, const std::string& policy, const PolicyModelImpl& model,
                        std::int64_t version) {
  saveCheckpointFile(path, {{policy, &model}}, version);
}

void saveCheckpointFile(const std::string& path,
                        const std::vector<std::pair<std::string, const PolicyModelImpl*>>& models,
                        std::int64_t version) {
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  // Write to a temporary name and rename, so a crash never leaves a truncated checkpoint
  // under the real name.
  const std::string tmp = path + ".tmp";
  {
    auto file = io::H5File::create(tmp);
    file.writeAttribute("format", "astraflow-checkpoint");
    file.writeAttribute("version", version);
    for (const auto& [policy, model] : models) {
      auto group = file.createGroup("policies/" + policy);
      saveModelWeights(group, *model);
    }
    file.flush();
  }
  std::filesystem::rename(tmp, path);
}

void loadCheckpointFile(const std::string& path, const std::string& policy, PolicyModelImpl& model) {
  auto file = io::H5File::openReadOnly(path);
  if (!file.hasAttribute("format") || file.readStringAttribute("format") != "astraflow-checkpoint") {
    throw Error(fmt::format("{}: not an astraflow checkpoint (no format attribute)", path));
  }
  if (!file.exists("policies/" + policy)) {
    throw Error(fmt::format("{}: holds no weights for policy '{}'", path, policy));
  }
  loadModelWeights(file.openGroup("policies/" + policy), model);
}

}  // namespace astraflow
