// Hugging Face model folders against the reference implementation: transformers makes random
// Qwen3, Qwen2 and Llama models (tests/model/hf_reference.py, every weight drawn at random,
// norms and biases included), saves them with save_pretrained and computes the log-probability
// of every position of 18 random sequences; astraflow loads the same folders
// (readHfModelConfig + loadHfWeights) and must give the same log-probs through the full forward
// (one sequence at a time and as one right-padded batch) and through the KV-cache path (a
// left-padded prefill, then one token per step). A model with another rotary setting must
// not pass the same comparison, and malformed folders are refused by name.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "astraflow/core/error.hpp"
#include "astraflow/core/hf_model_config.hpp"
#include "astraflow/io/safetensors.hpp"
#include "astraflow/model/checkpoint.hpp"
#include "astraflow/model/hf_weights.hpp"
#include "astraflow/model/policy_model.hpp"
#include "astraflow/text/tokenizer.hpp"
#include "io/temp_dir.hpp"

using namespace astraflow;

namespace {

const std::vector<std::string> kFamilies = {"qwen3", "qwen3_tied", "qwen2", "llama3_rope", "llama_linear_rope"};
constexpr double kTolerance = 1e-4;  // max |Δ log-prob| the issue allows (float32, CPU)

struct Reference {
  std::vector<std::vector<std::int64_t>> sequences;
  std::vector<std::vector<double>> logprobs;  // [0] = 0, then log p(token_t | <t)
};

// Made once for the suite: one Python start (importing torch and transformers costs seconds).
class HfFolders : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    const char* py = std::getenv("ASTRAFLOW_PYTHON");
    const char* script = std::getenv("ASTRAFLOW_HF_REFERENCE");
    if (!py || !script) {
      made_ = false;
      return;
    }
    std::string families;
    for (const auto& f : kFamilies) families += (families.empty() ? "" : ",") + f;
    made_ =
        std::system(
            (std::string(py) + " " + script + " make " + families + " " + dir_->path().string() + " 11").c_str()) == 0;
  }
  static void TearDownTestSuite() { delete dir_; }

 protected:
  void SetUp() override {
    ASSERT_TRUE(made_) << "tests/model/hf_reference.py failed or ASTRAFLOW_PYTHON / ASTRAFLOW_HF_REFERENCE unset "
                          "(run under ctest)";
  }
  static std::filesystem::path folder(const std::string& family) { return dir_->path() / family; }
  static Reference reference(const std::string& family) {
    std::ifstream in(folder(family) / "reference.json");
    const auto j = nlohmann::json::parse(in);
    return {j["sequences"].get<std::vector<std::vector<std::int64_t>>>(),
            j["logprobs"].get<std::vector<std::vector<double>>>()};
  }
  static PolicyModel load(const std::filesystem::path& dir, ModelConfig* override_config = nullptr) {
    ModelConfig m = readHfModelConfig(dir.string()).model;
    if (override_config) {
      m.rope_theta = override_config->rope_theta;
      m.rope_scaling = override_config->rope_scaling;
    }
    PolicyModel model(m);
    loadHfWeights(*model, dir);
    return model;
  }

  static test::TempDir* dir_;
  static bool made_;
};
test::TempDir* HfFolders::dir_ = nullptr;
bool HfFolders::made_ = false;

torch::Tensor row(const std::vector<std::int64_t>& ids) { return torch::tensor(ids, torch::kLong).unsqueeze(0); }

// Max |Δ| of the full forward, one sequence at a time.
double fullForwardError(PolicyModelImpl& model, const Reference& ref) {
  torch::NoGradGuard no_grad;
  double worst = 0;
  for (std::size_t s = 0; s < ref.sequences.size(); ++s) {
    const auto& ids = ref.sequences[s];
    const auto lp = sequenceLogProbs(model, row(ids), torch::tensor({static_cast<std::int64_t>(ids.size())}));
    for (std::size_t t = 1; t < ids.size(); ++t) {
      worst = std::max(worst, std::abs(lp[0][static_cast<std::int64_t>(t)].item<double>() - ref.logprobs[s][t]));
    }
  }
  return worst;
}

TEST_F(HfFolders, ConfigJsonIsReadAsTransformersReadsIt) {
  const auto q3 = readHfModelConfig(folder("qwen3").string());
  EXPECT_EQ(q3.model.family, ModelFamily::Qwen3);
  EXPECT_EQ(q3.model.headDim(), 16);  // config.json's head_dim, not hidden_size / heads (12)
  EXPECT_EQ(q3.model.rope_theta, 5000.0);
  EXPECT_FALSE(q3.model.tied_embeddings);
  EXPECT_EQ(q3.model.max_seq_len, 96);
  EXPECT_TRUE(readHfModelConfig(folder("qwen3_tied").string()).model.tied_embeddings);
  const auto q2 = readHfModelConfig(folder("qwen2").string()).model;
  EXPECT_EQ(q2.family, ModelFamily::Qwen2);
  EXPECT_TRUE(q2.qkvBias());
  EXPECT_FALSE(q2.oBias());
  EXPECT_FALSE(q2.qkNorm());
  const auto l3 = readHfModelConfig(folder("llama3_rope").string()).model;
  EXPECT_EQ(l3.family, ModelFamily::Llama);
  EXPECT_EQ(l3.rope_scaling.kind, RopeScaling::Kind::Llama3);
  EXPECT_EQ(l3.rope_scaling.original_max_position_embeddings, 16);
  EXPECT_TRUE(l3.mlp_bias && l3.oBias());
  EXPECT_EQ(readHfModelConfig(folder("llama_linear_rope").string()).model.rope_scaling.kind, RopeScaling::Kind::Linear);
}

TEST_F(HfFolders, FullForwardLogProbsMatchTransformers) {
  for (const auto& family : kFamilies) {
    auto model = load(folder(family));
    const auto ref = reference(family);
    const double single = fullForwardError(*model, ref);
    EXPECT_LE(single, kTolerance) << family;

    // All sequences as one right-padded batch: padding changes nothing.
    torch::NoGradGuard no_grad;
    std::int64_t longest = 0;
    for (const auto& s : ref.sequences) longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(s.size()));
    const auto B = static_cast<std::int64_t>(ref.sequences.size());
    auto tokens = torch::zeros({B, longest}, torch::kLong);
    auto lengths = torch::zeros({B}, torch::kLong);
    for (std::int64_t b = 0; b < B; ++b) {
      const auto& ids = ref.sequences[static_cast<std::size_t>(b)];
      tokens[b].narrow(0, 0, static_cast<std::int64_t>(ids.size())).copy_(torch::tensor(ids, torch::kLong));
      lengths[b] = static_cast<std::int64_t>(ids.size());
    }
    const auto lp = sequenceLogProbs(*model, tokens, lengths);
    double worst = 0;
    for (std::int64_t b = 0; b < B; ++b) {
      const auto& want = ref.logprobs[static_cast<std::size_t>(b)];
      for (std::size_t t = 1; t < want.size(); ++t) {
        worst = std::max(worst, std::abs(lp[b][static_cast<std::int64_t>(t)].item<double>() - want[t]));
      }
    }
    EXPECT_LE(worst, kTolerance) << family << " (padded batch)";
    std::printf("%s: max |d log-prob| full forward %.2e, padded batch %.2e\n", family.c_str(), single, worst);
  }
}

TEST_F(HfFolders, KvCacheDecodeLogProbsMatchTransformers) {
  for (const auto& family : kFamilies) {
    auto model = load(folder(family));
    const auto ref = reference(family);
    torch::NoGradGuard no_grad;
    const auto B = static_cast<std::int64_t>(ref.sequences.size());
    // Prompts of different lengths (a third of each sequence), left-padded into one prefill.
    std::vector<std::int64_t> prompt_len(static_cast<std::size_t>(B)), length(static_cast<std::size_t>(B));
    std::int64_t longest_prompt = 0, longest = 0;
    for (std::int64_t b = 0; b < B; ++b) {
      length[b] = static_cast<std::int64_t>(ref.sequences[b].size());
      prompt_len[b] = std::max<std::int64_t>(1, length[b] / 3);
      longest_prompt = std::max(longest_prompt, prompt_len[b]);
      longest = std::max(longest, length[b]);
    }
    auto tokens = torch::zeros({B, longest_prompt}, torch::kLong);
    auto valid = torch::zeros({B, longest_prompt}, torch::kBool);
    auto positions = torch::zeros({B, longest_prompt}, torch::kLong);
    for (std::int64_t b = 0; b < B; ++b) {
      const auto pad = longest_prompt - prompt_len[b];
      for (std::int64_t t = 0; t < prompt_len[b]; ++t) {
        tokens[b][pad + t] = ref.sequences[b][t];
        valid[b][pad + t] = true;
        positions[b][pad + t] = t;
      }
    }
    auto cache = model->newCache(B, longest_prompt + longest);
    auto logits = model->forwardCached(tokens, positions, valid, cache);  // [B, P, V]
    double worst = 0;
    auto check = [&](std::int64_t b, const torch::Tensor& step_logits, std::int64_t target_pos) {
      if (target_pos >= length[b]) return;
      const auto lp = torch::log_softmax(step_logits, -1)[ref.sequences[b][target_pos]].item<double>();
      worst = std::max(worst, std::abs(lp - ref.logprobs[b][target_pos]));
    };
    for (std::int64_t b = 0; b < B; ++b) {
      const auto pad = longest_prompt - prompt_len[b];
      for (std::int64_t t = 0; t < prompt_len[b]; ++t) check(b, logits[b][pad + t], t + 1);
    }
    // One token per step: row b feeds its token at prompt_len + s (padding once it has ended).
    for (std::int64_t s = 0; s + 1 < longest; ++s) {
      auto step = torch::zeros({B, 1}, torch::kLong);
      auto step_valid = torch::zeros({B, 1}, torch::kBool);
      auto step_pos = torch::zeros({B, 1}, torch::kLong);
      bool any = false;
      for (std::int64_t b = 0; b < B; ++b) {
        const auto pos = prompt_len[b] + s;
        if (pos < length[b]) {
          step_pos[b][0] = pos;
          step[b][0] = ref.sequences[b][pos];
          step_valid[b][0] = true;
          any = true;
        }
      }
      if (!any) break;
      const auto out = model->forwardCached(step, step_pos, step_valid, cache);
      for (std::int64_t b = 0; b < B; ++b) {
        if (step_valid[b][0].item<bool>()) check(b, out[b][0], prompt_len[b] + s + 1);
      }
    }
    EXPECT_LE(worst, kTolerance) << family << " (KV cache)";
    std::printf("%s: max |d log-prob| KV-cache decode %.2e\n", family.c_str(), worst);
  }
}

// The comparison can fail: another rotary base, or llama3 scaling left out, is seen.
TEST_F(HfFolders, AnotherRotarySettingIsDetected) {
  ModelConfig other = readHfModelConfig(folder("qwen3").string()).model;
  other.rope_theta *= 2;
  auto wrong_theta = load(folder("qwen3"), &other);
  const double theta_error = fullForwardError(*wrong_theta, reference("qwen3"));
  EXPECT_GT(theta_error, 100 * kTolerance);

  ModelConfig unscaled = readHfModelConfig(folder("llama3_rope").string()).model;
  unscaled.rope_scaling = RopeScaling{};
  auto no_scaling = load(folder("llama3_rope"), &unscaled);
  const double scaling_error = fullForwardError(*no_scaling, reference("llama3_rope"));
  EXPECT_GT(scaling_error, 100 * kTolerance);
  std::printf("wrong rotary base: %.2e; llama3 scaling left out: %.2e\n", theta_error, scaling_error);
}

// Weights that do not fit the config are refused by name, and nothing is loaded.
TEST_F(HfFolders, WeightsThatDoNotFitAreRefusedByName) {
  test::TempDir dir;
  std::filesystem::copy_file(folder("qwen2") / "config.json", dir.path() / "config.json");
  const auto original = io::SafetensorsFile::open(folder("qwen2") / "model.safetensors");
  auto expect_refused = [&](std::vector<io::StTensorView> tensors, const std::string& what) {
    io::writeSafetensors(dir.path() / "model.safetensors", tensors, {});
    auto model = load(folder("qwen2"));
    const auto before = model->orderedParameters().front().tensor.clone();
    try {
      loadHfWeights(*model, dir.path());
      ADD_FAILURE() << "accepted weights where " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_TRUE(torch::equal(before, model->orderedParameters().front().tensor)) << "half-loaded: " << what;
  };
  std::vector<io::StTensorView> all = original.tensors();
  auto without_bias = all;
  std::erase_if(without_bias, [](const auto& t) { return t.name == "model.layers.1.self_attn.k_proj.bias"; });
  expect_refused(without_bias, "tensor 'model.layers.1.self_attn.k_proj.bias' is missing");
  auto extra = all;
  extra.push_back(all.front());
  extra.back().name = "model.layers.7.mlp.up_proj.weight";
  expect_refused(extra, "'model.layers.7.mlp.up_proj.weight' is not a parameter of this model");
  auto reshaped = all;
  for (auto& t : reshaped) {
    if (t.name == "model.norm.weight") t.shape = {8, 6};
  }
  expect_refused(reshaped, "tensor 'model.norm.weight' has shape [8, 6]");
  // A NaN in the last tensor: refused before any tensor is copied.
  auto poisoned = all;
  std::vector<std::byte> bytes(poisoned.back().bytes.begin(), poisoned.back().bytes.end());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + bytes.size() - sizeof(float), &nan, sizeof(float));
  poisoned.back().bytes = bytes;
  expect_refused(poisoned, "tensor '" + poisoned.back().name + "' holds NaN or inf values");
}

Reference readReference(const std::filesystem::path& folder, nlohmann::json* all);
PolicyModel loadFolder(const std::filesystem::path& folder);

// Tests that run the astraflow program and the reference script with its Python (set by ctest).
class HfCommands : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cli && py && script) << "ASTRAFLOW_CLI / ASTRAFLOW_PYTHON / ASTRAFLOW_HF_REFERENCE unset (run under "
                                        "ctest)";
  }
  const char* cli = std::getenv("ASTRAFLOW_CLI");
  const char* py = std::getenv("ASTRAFLOW_PYTHON");
  const char* script = std::getenv("ASTRAFLOW_HF_REFERENCE");
  test::TempDir dir;
};

// astraflow init-model writes folders transformers loads as the same model, with a tokenizer
// AutoTokenizer loads: byte ids, ChatML special tokens and template, <|im_end|> as eos.
TEST_F(HfCommands, InitModelFoldersLoadInTransformersAsTheSameModel) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"qwen2",
       "--architecture qwen2 --hidden-size 48 --layers 2 --heads 4 --kv-heads 2 --intermediate-size 80 "
       "--max-positions 96 --seed 3"},
      {"llama_bf16",
       "--architecture llama --hidden-size 32 --layers 3 --heads 4 --kv-heads 1 --intermediate-size 64 "
       "--max-positions 128 --tie-embeddings false --attention-bias --dtype bfloat16 --seed 4"},
      {"qwen3", "--preset tiny-qwen3 --max-positions 96 --seed 5"},
  };
  for (const auto& [name, args] : cases) {
    const auto folder = dir.path() / name;
    ASSERT_EQ(
        std::system(fmt::format("{} init-model {} {} > {}.json", cli, folder.string(), args, folder.string()).c_str()),
        0)
        << name;
    // A second init-model into the same folder is refused (nothing is overwritten).
    EXPECT_NE(std::system(fmt::format("{} init-model {} 2>/dev/null", cli, folder.string()).c_str()), 0) << name;
    ASSERT_EQ(std::system(fmt::format("{} {} score {} 7", py, script, folder.string()).c_str()), 0) << name;
    nlohmann::json j;
    const Reference ref = readReference(folder, &j);
    auto model = loadFolder(folder);
    const double error = fullForwardError(*model, ref);
    EXPECT_LE(error, kTolerance) << name;
    std::printf("init-model %s: max |d log-prob| %.2e\n", name.c_str(), error);
    double lo = 0, hi = -1e9;
    for (const auto& row : ref.logprobs) {
      for (std::size_t t = 1; t < row.size(); ++t) lo = std::min(lo, row[t]), hi = std::max(hi, row[t]);
    }
    EXPECT_GT(hi - lo, 0.05) << name << ": log-probs too uniform for the comparison to mean anything";

    ASSERT_TRUE(j.contains("tokenized")) << name << ": AutoTokenizer did not load the folder";
    const auto& tok = j["tokenized"];
    EXPECT_EQ(tok["hello world"].get<std::vector<int>>(),
              (std::vector<int>{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'}));
    EXPECT_EQ(tok["<|im_start|>user"].get<std::vector<int>>(), (std::vector<int>{257, 'u', 's', 'e', 'r'}));
    std::vector<int> utf8;
    for (unsigned char c : std::string("caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80")) utf8.push_back(c);
    EXPECT_EQ(tok["caf\u00e9 \u4e2d\u6587 \U0001F600"].get<std::vector<int>>(), utf8);
    EXPECT_EQ(j["chat"].get<std::string>(), "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(j["eos_token"].get<std::string>(), "<|im_end|>");
  }
  // The bf16 folder holds bf16 tensors.
  const auto st = io::SafetensorsFile::open(dir.path() / "llama_bf16" / "model.safetensors");
  EXPECT_EQ(st.tensors().front().dtype, io::StDtype::BF16);
}

// The address range this process maps `file` at (/proc/self/maps), {0, 0} when it is not mapped.
std::pair<std::uintptr_t, std::uintptr_t> mappedRange(const std::filesystem::path& file) {
  std::ifstream maps("/proc/self/maps");
  const std::string name = std::filesystem::canonical(file).string();
  std::uintptr_t lo = 0, hi = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.size() < name.size() || line.compare(line.size() - name.size(), name.size(), name) != 0) continue;
    const auto dash = line.find('-'), space = line.find(' ');
    const auto begin = std::stoull(line.substr(0, dash), nullptr, 16);
    const auto end = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
    lo = lo == 0 ? begin : std::min<std::uintptr_t>(lo, begin);
    hi = std::max<std::uintptr_t>(hi, end);
  }
  return {lo, hi};
}

// A float32 folder loaded with HfLoad::Map: every parameter lies in the file's map (nothing
// copied), the model computes exactly what a copied load does, a step written into a parameter
// stays the process's own (the file is unchanged), and a bf16 folder is converted instead.
TEST_F(HfCommands, AFloat32FolderIsMappedNotCopied) {
  const auto folder = dir.path() / "f32";
  ASSERT_EQ(std::system(fmt::format("{} init-model {} --preset tiny-qwen3 --max-positions 96 --seed 6 > /dev/null", cli,
                                    folder.string())
                            .c_str()),
            0);
  const ModelConfig m = readHfModelConfig(folder.string()).model;
  PolicyModel copied(m), mapped(m);
  EXPECT_FALSE(loadHfWeights(*copied, folder));
  ASSERT_TRUE(loadHfWeights(*mapped, folder, HfLoad::Map));
  const auto [lo, hi] = mappedRange(folder / "model.safetensors");
  ASSERT_LT(lo, hi) << "the file is not mapped while the model holds it";
  const auto copied_params = copied->orderedParameters(), mapped_params = mapped->orderedParameters();
  ASSERT_EQ(copied_params.size(), mapped_params.size());
  for (std::size_t i = 0; i < mapped_params.size(); ++i) {
    const auto at = reinterpret_cast<std::uintptr_t>(mapped_params[i].tensor.data_ptr());
    EXPECT_TRUE(at >= lo && at < hi) << mapped_params[i].name << " was copied";
    EXPECT_TRUE(torch::equal(mapped_params[i].tensor, copied_params[i].tensor)) << mapped_params[i].name;
  }
  const auto ids = row({257, 104, 101, 108, 108, 111, 32, 119, 111});
  const auto lengths = torch::tensor({static_cast<std::int64_t>(9)});
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(sequenceLogProbs(*mapped, ids, lengths), sequenceLogProbs(*copied, ids, lengths)));
    // A trainer's step writes the parameters in place: the page becomes the process's own.
    mapped_params.front().tensor.add_(1.0f);
  }
  PolicyModel again(m);
  loadHfWeights(*again, folder);
  EXPECT_TRUE(torch::equal(again->orderedParameters().front().tensor, copied_params.front().tensor))
      << "the write reached the file";
  EXPECT_FALSE(torch::equal(mapped->orderedParameters().front().tensor, copied_params.front().tensor));
  // A bf16 folder into the float32 model: converted, not mapped.
  const auto bf16 = dir.path() / "bf16";
  ASSERT_EQ(std::system(fmt::format("{} init-model {} --preset tiny-qwen3 --max-positions 96 --dtype bfloat16 > "
                                    "/dev/null",
                                    cli, bf16.string())
                            .c_str()),
            0);
  PolicyModel converted(readHfModelConfig(bf16.string()).model);
  EXPECT_FALSE(loadHfWeights(*converted, bf16, HfLoad::Map));
}

Reference readReference(const std::filesystem::path& folder, nlohmann::json* all = nullptr) {
  std::ifstream in(folder / "reference.json");
  const auto j = nlohmann::json::parse(in);
  if (all) *all = j;
  return {j["sequences"].get<std::vector<std::vector<std::int64_t>>>(),
          j["logprobs"].get<std::vector<std::vector<double>>>()};
}

PolicyModel loadFolder(const std::filesystem::path& folder) {
  PolicyModel model(readHfModelConfig(folder.string()).model);
  loadHfWeights(*model, folder);
  return model;
}

// A trained policy out of an astraflow checkpoint: export-hf writes a folder transformers loads
// as the same model with a tokenizer that encodes as astraflow's task vocabulary; transformers'
// save_pretrained of it reads back bit-exact; bf16 exports hold the rounded weights.
TEST_F(HfCommands, ExportHfCheckpointBecomesAFolderTransformersLoads) {
  const auto tokenizer = makeTaskTokenizer();
  ModelConfig m;  // the native block (Qwen3), as a run's config builds it
  m.vocab_size = tokenizer->vocabSize();
  m.d_model = 32;
  m.ffn_hidden = 64;
  m.max_seq_len = 96;
  torch::manual_seed(21);
  PolicyModel trained(m);
  {
    // Weights far from the initial ones, so that the log-probs are anything but uniform.
    torch::NoGradGuard no_grad;
    for (auto& p : trained->orderedParameters()) p.tensor.add_(torch::randn_like(p.tensor) * 0.3);
  }
  const auto ckpt = dir.file("sft.h5");
  saveCheckpointFile(ckpt, "solver", *trained, 12);
  const auto out = dir.path() / "exported";
  ASSERT_EQ(
      std::system(fmt::format("{} export-hf {} {} > {}", cli, ckpt, out.string(), dir.file("export.json")).c_str()), 0);
  EXPECT_NE(std::system(fmt::format("{} export-hf {} {} 2>/dev/null", cli, ckpt, out.string()).c_str()), 0)
      << "overwrote an existing folder";
  EXPECT_NE(std::system(
                fmt::format("{} export-hf --policy verifier {} {} 2>/dev/null", cli, ckpt, dir.file("other")).c_str()),
            0)
      << "exported a policy the checkpoint does not hold";

  ASSERT_EQ(std::system(fmt::format("{} {} score {} 9", py, script, out.string()).c_str()), 0);
  nlohmann::json j;
  const auto ref = readReference(out, &j);
  const double error = fullForwardError(*trained, ref);
  EXPECT_LE(error, kTolerance);
  std::printf("export-hf: max |d log-prob| %.2e\n", error);
  ASSERT_TRUE(j.contains("tokenized")) << "AutoTokenizer did not load the exported folder";
  for (const auto& [text, ids] : j["tokenized"].items()) {
    EXPECT_EQ(ids.get<std::vector<std::int32_t>>(), tokenizer->encode(text)) << text;
  }
  EXPECT_EQ(j["eos_token"].get<std::string>(), tokenizer->tokenText(tokenizer->eosId()));

  // astraflow -> transformers save_pretrained -> astraflow: bit-exact.
  const auto resaved = dir.path() / "resaved";
  ASSERT_EQ(std::system(fmt::format("{} {} resave {} {}", py, script, out.string(), resaved.string()).c_str()), 0);
  auto back = loadFolder(resaved);
  ASSERT_EQ(back->orderedParameters().size(), trained->orderedParameters().size());
  for (std::size_t i = 0; i < back->orderedParameters().size(); ++i) {
    EXPECT_TRUE(torch::equal(back->orderedParameters()[i].tensor, trained->orderedParameters()[i].tensor))
        << trained->orderedParameters()[i].name;
  }

  const auto out_bf16 = dir.path() / "exported_bf16";
  ASSERT_EQ(
      std::system(fmt::format("{} export-hf --dtype bfloat16 {} {} > /dev/null", cli, ckpt, out_bf16.string()).c_str()),
      0);
  auto rounded = loadFolder(out_bf16);
  for (std::size_t i = 0; i < rounded->orderedParameters().size(); ++i) {
    const auto& want = trained->orderedParameters()[i].tensor;
    EXPECT_TRUE(torch::equal(rounded->orderedParameters()[i].tensor, want.to(torch::kBFloat16).to(torch::kFloat32)))
        << trained->orderedParameters()[i].name;
  }

  // --untied (the folder a vLLM pool's server starts from): the head as a tensor of its own, equal
  // to the embeddings, config.json untied; transformers computes the same log-probs from it.
  const auto untied = dir.path() / "exported_untied";
  ASSERT_EQ(std::system(fmt::format("{} export-hf --untied {} {} > /dev/null", cli, ckpt, untied.string()).c_str()), 0);
  const ModelConfig untied_config = readHfModelConfig(untied.string()).model;
  EXPECT_FALSE(untied_config.tied_embeddings);
  auto separate = loadFolder(untied);
  const auto find = [&](const char* name) {
    for (const auto& p : separate->orderedParameters())
      if (p.name == name) return p.tensor;
    ADD_FAILURE() << name << " is not in the untied folder";
    return torch::Tensor();
  };
  EXPECT_TRUE(torch::equal(find("lm_head.weight"), find("model.embed_tokens.weight")));
  ASSERT_EQ(std::system(fmt::format("{} {} score {} 9", py, script, untied.string()).c_str()), 0);
  EXPECT_LE(fullForwardError(*trained, readReference(untied)), kTolerance);
}

}  // namespace
