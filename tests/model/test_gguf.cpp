// `astraflow export-gguf` against the gguf reader and transformers' GGUF loader
// (tests/model/hf_reference.py gguf): random Qwen3, Qwen2 and Llama folders from init-model
// (Llama with and without attention biases, whose q/k rows llama.cpp orders differently),
// f32, f16 and bf16 files, and a Llama folder with a trained BPE tokenizer (merges, bos). Every
// tensor must read back with the folder's values (rounded as the dtype rounds them), the
// vocabulary and merges must be the tokenizer's, and transformers' model from the GGUF file
// must give the folder's log-probs. Llama-3 rotary scaling is written as rope_freqs.weight.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "io/temp_dir.hpp"

using nlohmann::json;

namespace {

std::string run(const std::string& command) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe.get())) out += buf.data();
  return out;
}

struct Case {
  std::string folder, init_args, dtype;
  double logprob_tolerance;
};

class Gguf : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cli_ && py_ && script_) << "run under ctest (ASTRAFLOW_CLI, ASTRAFLOW_PYTHON, ASTRAFLOW_HF_REFERENCE)";
  }
  const char* cli_ = std::getenv("ASTRAFLOW_CLI");
  const char* py_ = std::getenv("ASTRAFLOW_PYTHON");
  const char* script_ = std::getenv("ASTRAFLOW_HF_REFERENCE");
  astraflow::test::TempDir dir_;
};

TEST_F(Gguf, ExportsReadBackExactAndScoreAsTheirFolders) {
  const std::string tok = dir_.file("bpe");
  ASSERT_EQ(std::system(fmt::format("{} {} bpe_tokenizer {}", py_, script_, tok).c_str()), 0);
  // transformers' Qwen3 GGUF config reads no head_dim: 256 / 2 heads = its default 128 loads.
  const std::string qwen3 = "--hidden-size 256 --heads 2 --kv-heads 1 --head-dim 128 --seed 5";
  const std::vector<Case> cases = {
      {"qwen3", qwen3, "f32", 1e-5},
      {"qwen3", qwen3, "f16", 0.05},  // log-probs move by the rounding of the weights
      {"qwen3", qwen3, "bf16", 0.05},
      {"qwen2", "--architecture qwen2 --seed 7", "f32", 1e-5},
      // Without biases transformers loads the Llama file and undoes llama.cpp's q/k row order:
      // equal log-probs show the order is llama.cpp's.
      {"llama", "--architecture llama --seed 8", "f32", 1e-5},
      // With biases (which transformers' GGUF config cannot express) the reader check alone:
      // the bias rows must be permuted as the weight rows are.
      {"llama_bias", "--architecture llama --attention-bias --seed 9", "f32", 0},
      // A tokenizer with merges, Llama-3's split and a bos template, in a Llama folder.
      {"llama_bpe", fmt::format("--architecture llama --tokenizer {}/tokenizer.json --seed 4", tok), "f16", 0.05},
  };
  std::filesystem::create_directories(dir_.path() / "gguf");
  std::string pairs;
  for (const Case& c : cases) {
    const std::string folder = dir_.file(c.folder);
    if (!std::filesystem::exists(folder)) {
      ASSERT_EQ(std::system(fmt::format("{} init-model {} {} > /dev/null", cli_, folder, c.init_args).c_str()), 0);
    }
    const std::string file = dir_.file("gguf/" + c.folder + "." + c.dtype + ".gguf");
    ASSERT_EQ(
        std::system(fmt::format("{} export-gguf {} {} --dtype {} > /dev/null", cli_, folder, file, c.dtype).c_str()),
        0);
    pairs += " " + folder + " " + file;
  }
  std::map<std::string, json> results;  // by file
  std::istringstream out(run(fmt::format("{} {} gguf{} 2>/dev/null", py_, script_, pairs)));
  for (std::string line; std::getline(out, line);) {
    if (line.rfind("{\"file\"", 0) == 0) {
      const json r = json::parse(line);
      results[r["file"].get<std::string>()] = r;
    }
  }
  for (const Case& c : cases) {
    const std::string name = c.folder + " " + c.dtype;
    const auto it = results.find(dir_.file("gguf/" + c.folder + "." + c.dtype + ".gguf"));
    ASSERT_NE(it, results.end()) << name << ": no result from the reference check";
    const json& r = it->second;
    EXPECT_TRUE(r.value("names_match", false)) << name << " " << r.dump();
    EXPECT_EQ(r.value("tensor_error", 1.0), 0.0) << name;
    EXPECT_TRUE(r.value("tokens_match", false)) << name;
    EXPECT_TRUE(r.value("merges_match", false)) << name;
    EXPECT_TRUE(r.value("chat_template", false)) << name;
    EXPECT_EQ(r.value("pre", ""), c.folder == "llama_bpe" ? "llama-bpe" : "qwen2") << name;
    if (c.logprob_tolerance > 0) {
      ASSERT_TRUE(r.value("keys_equal", false)) << name << ": transformers did not load the file as the folder";
      EXPECT_LE(r["logprob_error"].get<double>(), c.logprob_tolerance) << name;
      if (c.dtype != "f32") {
        EXPECT_GT(r["weight_error"].get<double>(), 0.0) << name;  // the matrices were rounded
      }
    }
    if (c.folder == "llama_bpe") {
      EXPECT_GT(r.value("merges", 0), 50) << name;
      EXPECT_EQ(r.value("bos_token_id", -1), 0) << name;  // <|begin_of_text|>, put before every text
      EXPECT_EQ(r.value("eos_token_id", -1), 1) << name;  // <|eot_id|>
      EXPECT_TRUE(r.value("add_bos_token", false)) << name;
    }
  }
}

// Llama-3 rotary scaling goes as llama.cpp's rope_freqs.weight (checked against the converter's
// formula in the reference); outside the Llama family it is refused by name.
TEST_F(Gguf, Llama3RopeScalingAsRopeFreqs) {
  for (const char* arch : {"llama", "qwen3"}) {
    const std::string folder = dir_.file(arch);
    ASSERT_EQ(std::system(fmt::format("{} init-model {} --architecture {} > /dev/null", cli_, folder, arch).c_str()),
              0);
    json config;
    std::ifstream(folder + "/config.json") >> config;
    config["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 500000.0},
                                 {"factor", 8.0},           {"low_freq_factor", 1.0},
                                 {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
    config.erase("rope_scaling");
    std::ofstream(folder + "/config.json") << config.dump(2);
  }
  const std::string file = dir_.file("llama3.gguf");
  ASSERT_EQ(std::system(fmt::format("{} export-gguf {} {} > /dev/null", cli_, dir_.file("llama"), file).c_str()), 0);
  const std::string out = run(fmt::format("{} {} gguf {} {} 2>/dev/null", py_, script_, dir_.file("llama"), file));
  const json r = json::parse(out.substr(out.rfind("{\"file\"")));
  EXPECT_TRUE(r.value("names_match", false)) << r.dump();  // rope_freqs.weight is there, and expected
  EXPECT_EQ(r.value("tensor_error", 1.0), 0.0) << r.dump();
  const std::string err = run(fmt::format("{} export-gguf {} {} 2>&1", cli_, dir_.file("qwen3"), dir_.file("x.gguf")));
  EXPECT_NE(err.find("rope_type 'llama3'"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("x.gguf")));
}

}  // namespace
