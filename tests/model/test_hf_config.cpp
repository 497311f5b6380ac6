// config.json in and out (core/hf_model_config.hpp): what astraflow cannot compute is refused
// naming the file and the field, and what hfConfigJson writes reads back as the same model.
// (The folders transformers writes are read in test_hf_model.cpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "astraflow/core/error.hpp"
#include "astraflow/core/hf_model_config.hpp"
#include "io/temp_dir.hpp"

using namespace astraflow;

namespace {

void writeConfig(const test::TempDir& dir, const nlohmann::json& j) {
  std::ofstream(dir.file("config.json")) << j.dump();
}

std::string refusal(const test::TempDir& dir) {
  try {
    readHfModelConfig(dir.path().string());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(HfConfig, UnsupportedSettingsAreRefusedByName) {
  test::TempDir dir;
  const nlohmann::json base = {{"architectures", {"Qwen3ForCausalLM"}},
                               {"hidden_size", 32},
                               {"num_hidden_layers", 1},
                               {"num_attention_heads", 4},
                               {"num_key_value_heads", 2},
                               {"head_dim", 8},
                               {"intermediate_size", 64},
                               {"vocab_size", 50}};
  writeConfig(dir, base);
  EXPECT_EQ(refusal(dir), "accepted");
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"architectures", {"MistralForCausalLM"}, "'architectures' is [\"MistralForCausalLM\"]; supported: Qwen3"},
      {"model_type", "llama", "field 'model_type' is 'llama' but architectures says Qwen3ForCausalLM"},
      {"rope_parameters", {{"rope_type", "yarn"}, {"factor", 4.0}}, "'rope_parameters.rope_type' is 'yarn'"},
      {"rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}, "'rope_scaling.type' is 'dynamic'"},
      {"use_sliding_window", true, "'use_sliding_window' is true"},
      {"layer_types", {"sliding_attention"}, "'layer_types' holds \"sliding_attention\""},
      {"hidden_act", "gelu", "'hidden_act' is 'gelu'; supported: silu"},
      {"attention_dropout", 0.1, "'attention_dropout' is 0.1"},
      {"quantization_config", {{"quant_method", "gptq"}}, "'quantization_config' is set"},
      {"partial_rotary_factor", 0.5, "'partial_rotary_factor' is not 1.0"},
      {"num_key_value_heads", 3, "'num_key_value_heads' is 3; allowed: a divisor of num_attention_heads (4)"},
      {"hidden_size", "32", "'hidden_size' is \"32\"; expected an integer"},
      {"hidden_size", nullptr, "'hidden_size' is missing"},
  };
  for (const auto& c : cases) {
    auto j = base;
    if (c.value.is_null()) {
      j.erase(c.key);
    } else {
      j[c.key] = c.value;
    }
    writeConfig(dir, j);
    const auto msg = refusal(dir);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.key << ": " << msg;
    EXPECT_NE(msg.find(dir.file("config.json")), std::string::npos) << msg;  // names the file
  }
  std::ofstream(dir.file("config.json")) << "{\"architectures\": [";
  EXPECT_NE(refusal(dir).find("not valid JSON"), std::string::npos);
  std::filesystem::remove(dir.file("config.json"));
  EXPECT_NE(refusal(dir).find("cannot be read"), std::string::npos);
}

// What hfConfigJson writes reads back as the same model (init-model and export-hf use it).
TEST(HfConfig, WrittenConfigReadsBackTheSameModel) {
  test::TempDir dir;
  ModelConfig m;
  m.family = ModelFamily::Llama;
  m.vocab_size = 77;
  m.d_model = 40;
  m.heads = 5;
  m.kv_heads = 1;
  m.head_dim = 10;
  m.layers = 3;
  m.ffn_hidden = 96;
  m.max_seq_len = 200;
  m.tied_embeddings = true;
  m.attention_bias = true;
  m.rope_theta = 123456.0;
  m.rope_scaling = {RopeScaling::Kind::Llama3, 8.0, 1.0, 4.0, 64};
  std::ofstream(dir.file("config.json")) << hfConfigJson(m, "float32", 1, -1, {2, 3});
  const auto back = readHfModelConfig(dir.path().string());
  EXPECT_TRUE(back.unread_fields.empty()) << back.unread_fields.front();
  const auto& r = back.model;
  EXPECT_EQ(r.family, m.family);
  EXPECT_EQ(r.vocab_size, 77);
  EXPECT_EQ(r.headDim(), 10);
  EXPECT_EQ(r.kv_heads, 1);
  EXPECT_EQ(r.max_position_embeddings, 200);
  EXPECT_TRUE(r.tied_embeddings && r.attention_bias && !r.mlp_bias);
  EXPECT_EQ(r.rope_theta, m.rope_theta);
  EXPECT_EQ(r.rope_scaling.kind, RopeScaling::Kind::Llama3);
  EXPECT_EQ(r.rope_scaling.original_max_position_embeddings, 64);
  EXPECT_EQ(back.bos_token_id, 1);
  EXPECT_EQ(back.eos_token_ids, (std::vector<int>{2, 3}));
}

}  // namespace
