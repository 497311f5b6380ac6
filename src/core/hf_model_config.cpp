// config.json of a Hugging Face causal LM → ModelConfig, and back. The defaults of absent
// fields are those of transformers' Qwen3Config / Qwen2Config / LlamaConfig (docs/models.md).
#include "astraflow/core/hf_model_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "astraflow/core/error.hpp"

namespace astraflow {

namespace {

using nlohmann::json;

// Typed reads of one JSON object that remember which keys were read, so the rest can be
// reported; every error names the file and the field.
class Fields {
 public:
  Fields(const json& object, std::string file, std::string prefix = {})
      : object_(object), file_(std::move(file)), prefix_(std::move(prefix)) {}

  const json* find(const std::string& key) {
    read_.insert(key);
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  std::int64_t integer(const std::string& key, std::optional<std::int64_t> fallback, std::int64_t min,
                       std::int64_t max) {
    const json* v = find(key);
    if (!v) {
      if (!fallback) fail(key, "is missing");
      return *fallback;
    }
    if (!v->is_number_integer()) fail(key, fmt::format("is {}; expected an integer", v->dump()));
    const auto x = v->get<std::int64_t>();
    if (x < min || x > max) fail(key, fmt::format("is {}; allowed: {} to {}", x, min, max));
    return x;
  }
  double number(const std::string& key, double fallback, double min, double max) {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number()) fail(key, fmt::format("is {}; expected a number", v->dump()));
    const auto x = v->get<double>();
    if (!(x >= min && x <= max)) fail(key, fmt::format("is {}; allowed: {} to {}", x, min, max));
    return x;
  }
  bool boolean(const std::string& key, bool fallback) {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) fail(key, fmt::format("is {}; expected true or false", v->dump()));
    return v->get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_string()) fail(key, fmt::format("is {}; expected a string", v->dump()));
    return v->get<std::string>();
  }
  // Keys present but never read, as "prefix.key".
  std::vector<std::string> unread() const {
    std::vector<std::string> out;
    for (const auto& [key, value] : object_.items()) {
      if (!read_.count(key)) out.push_back(prefix_ + key);
    }
    return out;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw ConfigError(fmt::format("{}: field '{}{}' {}", file_, prefix_, key, what));
  }

 private:
  const json& object_;
  std::string file_;
  std::string prefix_;
  std::set<std::string> read_;
};

struct FamilyInfo {
  ModelFamily family;
  const char* architecture;
  const char* model_type;
  int default_max_positions;
};
constexpr FamilyInfo kFamilies[] = {
    {ModelFamily::Qwen3, "Qwen3ForCausalLM", "qwen3", 32768},
    {ModelFamily::Qwen2, "Qwen2ForCausalLM", "qwen2", 32768},
    {ModelFamily::Llama, "LlamaForCausalLM", "llama", 2048},
};

const FamilyInfo& infoOf(ModelFamily family) {
  for (const auto& f : kFamilies) {
    if (f.family == family) return f;
  }
  return kFamilies[0];
}

// Fields that only describe the checkpoint or how transformers runs it, not the forward pass.
const std::set<std::string> kDescriptive = {
    "transformers_version", "dtype",         "torch_dtype",       "use_cache",
    "initializer_range",    "_name_or_path", "output_attentions", "output_hidden_states",
    "return_dict",          "pretraining_tp"  // slicing only
};

void readRope(Fields& top, const std::string& file, HfModelConfig& out) {
  ModelConfig& m = out.model;
  // transformers 5 writes rope_parameters {rope_type, rope_theta, …}; older checkpoints have a
  // top-level rope_theta and rope_scaling {type | rope_type, …} (null for plain rotary).
  const double top_theta = top.number("rope_theta", 10000.0, 1e-3, 1e12);
  const json* params = top.find("rope_parameters");
  std::string where = "rope_parameters";
  if (!params) {
    params = top.find("rope_scaling");
    where = "rope_scaling";
  }
  const double top_partial = top.number("partial_rotary_factor", 1.0, 0.0, 1.0);
  if (top_partial != 1.0) top.fail("partial_rotary_factor", "is not 1.0; partial rotary embeddings are not supported");
  m.rope_theta = top_theta;
  if (!params) return;
  if (!params->is_object()) top.fail(where, fmt::format("is {}; expected an object", params->dump()));
  for (const auto& [key, value] : params->items()) {
    if (value.is_object()) {
      top.fail(where, "holds per-layer-type rotary parameters (key '" + key + "'); allowed: one set for all layers");
    }
  }
  Fields rope(*params, file, where + ".");
  std::string type = rope.string("rope_type", "");
  const std::string legacy_type = rope.string("type", "");
  if (type.empty()) type = legacy_type.empty() ? "default" : legacy_type;
  m.rope_theta = rope.number("rope_theta", top_theta, 1e-3, 1e12);
  if (rope.number("partial_rotary_factor", 1.0, 0.0, 1.0) != 1.0) {
    rope.fail("partial_rotary_factor", "is not 1.0; partial rotary embeddings are not supported");
  }
  if (type == "default") {
    m.rope_scaling.kind = RopeScaling::Kind::None;
  } else if (type == "linear") {
    m.rope_scaling.kind = RopeScaling::Kind::Linear;
    m.rope_scaling.factor = rope.number("factor", std::numeric_limits<double>::quiet_NaN(), 1e-6, 1e6);
    if (!(m.rope_scaling.factor > 0)) rope.fail("factor", "is missing (linear scaling needs it)");
  } else if (type == "llama3") {
    auto& s = m.rope_scaling;
    s.kind = RopeScaling::Kind::Llama3;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    s.factor = rope.number("factor", nan, 1e-6, 1e6);
    s.low_freq_factor = rope.number("low_freq_factor", nan, 1e-6, 1e6);
    s.high_freq_factor = rope.number("high_freq_factor", nan, 1e-6, 1e6);
    for (const char* key : {"factor", "low_freq_factor", "high_freq_factor"}) {
      if (!rope.find(key)) rope.fail(key, "is missing (llama3 scaling needs it)");
    }
    if (s.high_freq_factor <= s.low_freq_factor) {
      rope.fail("high_freq_factor",
                fmt::format("is {}; allowed: more than low_freq_factor ({})", s.high_freq_factor, s.low_freq_factor));
    }
    const auto top_original = top.integer("original_max_position_embeddings", m.max_position_embeddings, 1, 1 << 30);
    s.original_max_position_embeddings =
        static_cast<int>(rope.integer("original_max_position_embeddings", top_original, 1, 1 << 30));
  } else {
    rope.fail(type == legacy_type ? "type" : "rope_type",
              fmt::format("is '{}'; supported: default, linear, llama3 (dynamic, yarn, longrope and the others "
                          "are not computed by astraflow)",
                          type));
  }
  for (auto& f : rope.unread()) out.unread_fields.push_back(std::move(f));
}

}  // namespace

const char* familyArchitecture(ModelFamily family) { return infoOf(family).architecture; }

const char* ropeTypeName(RopeScaling::Kind kind) {
  switch (kind) {
    case RopeScaling::Kind::Linear: return "linear";
    case RopeScaling::Kind::Llama3: return "llama3";
    default: return "default";
  }
}

namespace {

json readConfigJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("{}: cannot be read (a Hugging Face model folder holds config.json)", path));
  std::stringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::exception& e) {
    throw ConfigError(fmt::format("{}: not valid JSON ({})", path, e.what()));
  }
  if (!j.is_object()) throw ConfigError(fmt::format("{}: not a JSON object", path));
  return j;
}

// architectures (one supported class) and a model_type that agrees with it.
const FamilyInfo& readFamily(Fields& f) {
  const json* archs = f.find("architectures");
  if (!archs || !archs->is_array() || archs->size() != 1 || !(*archs)[0].is_string()) {
    f.fail("architectures", fmt::format("is {}; expected one of [\"Qwen3ForCausalLM\"], [\"Qwen2ForCausalLM\"], "
                                        "[\"LlamaForCausalLM\"]",
                                        archs ? archs->dump() : "missing"));
  }
  const auto arch = (*archs)[0].get<std::string>();
  const FamilyInfo* info = nullptr;
  for (const auto& fam : kFamilies) {
    if (arch == fam.architecture) info = &fam;
  }
  if (!info) {
    f.fail("architectures",
           fmt::format("is [\"{}\"]; supported: Qwen3ForCausalLM, Qwen2ForCausalLM, LlamaForCausalLM", arch));
  }
  const auto model_type = f.string("model_type", info->model_type);
  if (model_type != info->model_type) {
    f.fail("model_type",
           fmt::format("is '{}' but architectures says {} (model_type '{}')", model_type, arch, info->model_type));
  }
  return *info;
}

// The shape: sizes, norms, biases, with the family's defaults.
void readShape(Fields& f, const FamilyInfo& info, ModelConfig& m) {
  constexpr std::int64_t kBig = 1 << 24;
  m.d_model = static_cast<int>(f.integer("hidden_size", std::nullopt, 1, kBig));
  m.layers = static_cast<int>(f.integer("num_hidden_layers", std::nullopt, 1, 4096));
  m.heads = static_cast<int>(f.integer("num_attention_heads", std::nullopt, 1, 4096));
  m.kv_heads = static_cast<int>(f.integer("num_key_value_heads", m.heads, 1, 4096));
  // Qwen3Config's head_dim defaults to 128; Qwen2 and Llama derive it from the hidden size.
  const std::int64_t derived_head_dim = m.family == ModelFamily::Qwen3 ? 128 : m.d_model / m.heads;
  m.head_dim = static_cast<int>(f.integer("head_dim", derived_head_dim, 1, 65536));
  m.ffn_hidden = static_cast<int>(f.integer("intermediate_size", std::nullopt, 1, kBig));
  m.vocab_size = static_cast<int>(f.integer("vocab_size", std::nullopt, 1, 1 << 30));
  m.max_position_embeddings =
      static_cast<int>(f.integer("max_position_embeddings", info.default_max_positions, 1, 1 << 30));
  m.max_seq_len = m.max_position_embeddings;
  m.rms_eps = f.number("rms_norm_eps", 1e-6, 1e-12, 1.0);
  m.tied_embeddings = f.boolean("tie_word_embeddings", false);
  if (m.family != ModelFamily::Qwen2) m.attention_bias = f.boolean("attention_bias", false);
  if (m.family == ModelFamily::Llama) m.mlp_bias = f.boolean("mlp_bias", false);
  if (m.heads % m.kv_heads != 0) {
    f.fail("num_key_value_heads",
           fmt::format("is {}; allowed: a divisor of num_attention_heads ({})", m.kv_heads, m.heads));
  }
  if (m.head_dim % 2 != 0) f.fail("head_dim", fmt::format("is {}; allowed: an even size", m.head_dim));
}

// What astraflow does not compute is refused by name: another activation, dropout,
// quantisation, sliding-window or other non-full attention layers.
void refuseUnsupported(Fields& f, const ModelConfig& m) {
  if (const auto act = f.string("hidden_act", "silu"); act != "silu") {
    f.fail("hidden_act", fmt::format("is '{}'; supported: silu", act));
  }
  if (const double p = f.number("attention_dropout", 0.0, 0.0, 1.0); p != 0.0) {
    f.fail("attention_dropout", fmt::format("is {}; supported: 0 (astraflow trains without dropout)", p));
  }
  if (f.find("quantization_config")) f.fail("quantization_config", "is set; quantised checkpoints are not supported");
  if (m.family != ModelFamily::Llama) {
    if (f.boolean("use_sliding_window", false))
      f.fail("use_sliding_window",
             "is true; sliding-window attention is "
             "not supported");
    f.find("sliding_window");     // unused without use_sliding_window
    f.find("max_window_layers");  // idem
  }
  if (const json* types = f.find("layer_types")) {
    if (!types->is_array()) f.fail("layer_types", "is not a list");
    for (const auto& t : *types) {
      if (t != "full_attention") {
        f.fail("layer_types", fmt::format("holds {}; supported: \"full_attention\" for every layer", t.dump()));
      }
    }
  }
}

void readSpecialTokens(Fields& f, HfModelConfig& out) {
  out.bos_token_id = static_cast<int>(f.integer("bos_token_id", -1, -1, 1 << 30));
  out.pad_token_id = static_cast<int>(f.integer("pad_token_id", -1, -1, 1 << 30));
  if (const json* eos = f.find("eos_token_id")) {
    const auto one = [&](const json& v) {
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0) f.fail("eos_token_id", "holds " + v.dump());
      out.eos_token_ids.push_back(v.get<int>());
    };
    if (eos->is_array()) {
      for (const auto& v : *eos) one(v);
    } else {
      one(*eos);
    }
  }
}

}  // namespace

HfModelConfig readHfModelConfig(const std::string& folder) {
  const auto path = (std::filesystem::path(folder) / "config.json").string();
  const json j = readConfigJson(path);
  HfModelConfig out;
  ModelConfig& m = out.model;
  m.hf_path = std::filesystem::absolute(folder).lexically_normal().string();
  Fields f(j, path);
  const FamilyInfo& info = readFamily(f);
  m.family = info.family;
  readShape(f, info, m);
  refuseUnsupported(f, m);
  readRope(f, path, out);
  readSpecialTokens(f, out);
  for (const auto& key : kDescriptive) f.find(key);
  for (auto& key : f.unread()) out.unread_fields.push_back(std::move(key));
  return out;
}

std::string hfConfigJson(const ModelConfig& m, const std::string& dtype, int bos_token_id, int pad_token_id,
                         const std::vector<int>& eos_token_ids) {
  const FamilyInfo& info = infoOf(m.family);
  json j;
  j["architectures"] = {info.architecture};
  j["model_type"] = info.model_type;
  j["hidden_size"] = m.d_model;
  j["num_hidden_layers"] = m.layers;
  j["num_attention_heads"] = m.heads;
  j["num_key_value_heads"] = m.kv_heads;
  j["head_dim"] = m.headDim();
  j["intermediate_size"] = m.ffn_hidden;
  j["vocab_size"] = m.vocab_size;
  j["max_position_embeddings"] = m.max_position_embeddings > 0 ? m.max_position_embeddings : m.max_seq_len;
  j["rms_norm_eps"] = m.rms_eps;
  j["tie_word_embeddings"] = m.tied_embeddings;
  j["hidden_act"] = "silu";
  j["attention_dropout"] = 0.0;
  if (m.family != ModelFamily::Qwen2) j["attention_bias"] = m.attention_bias;
  if (m.family == ModelFamily::Llama) j["mlp_bias"] = m.mlp_bias;
  if (m.family != ModelFamily::Llama) j["use_sliding_window"] = false;
  json rope;
  rope["rope_theta"] = m.rope_theta;
  switch (m.rope_scaling.kind) {
    case RopeScaling::Kind::None: rope["rope_type"] = "default"; break;
    case RopeScaling::Kind::Linear:
      rope["rope_type"] = "linear";
      rope["factor"] = m.rope_scaling.factor;
      break;
    case RopeScaling::Kind::Llama3:
      rope["rope_type"] = "llama3";
      rope["factor"] = m.rope_scaling.factor;
      rope["low_freq_factor"] = m.rope_scaling.low_freq_factor;
      rope["high_freq_factor"] = m.rope_scaling.high_freq_factor;
      rope["original_max_position_embeddings"] = m.rope_scaling.original_max_position_embeddings;
      break;
  }
  j["rope_parameters"] = rope;
  // Older transformers read rope_theta at the top level.
  j["rope_theta"] = m.rope_theta;
  j["dtype"] = dtype;
  j["bos_token_id"] = bos_token_id >= 0 ? json(bos_token_id) : json(nullptr);
  j["pad_token_id"] = pad_token_id >= 0 ? json(pad_token_id) : json(nullptr);
  if (eos_token_ids.size() == 1) {
    j["eos_token_id"] = eos_token_ids.front();
  } else if (!eos_token_ids.empty()) {
    j["eos_token_id"] = eos_token_ids;
  }
  return j.dump(2) + "\n";
}

}  // namespace astraflow
