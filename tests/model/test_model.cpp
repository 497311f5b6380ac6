// The policy transformer: KV-cache forward equals the full forward, padding does not leak,
// causality holds, weights export/import and HDF5 checkpoints round-trip bit-exactly, and a
// checkpoint that does not fit the config is refused naming the tensor.
#include <gtest/gtest.h>

#include <unistd.h>
#include "test_model_config.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "astraflow/core/error.hpp"
#include "astraflow/io/h5.hpp"
#include "astraflow/model/checkpoint.hpp"
#include "astraflow/model/policy_model.hpp"

using namespace astraflow;

namespace {

ModelConfig smallConfig() { return test_support::tinyModel(50, 32, 2, 4, 2, 64, 64); }

// Tolerance for float32 paths that sum in a different order (cache vs full attention).
constexpr double kTol = 1e-5;

std::string tempDir() {
  char tmpl[] = "/tmp/astraflow_model_XXXXXX";
  return mkdtemp(tmpl);
}

}  // namespace

TEST(PolicyModel, KvCacheMatchesFullForward) {
  torch::manual_seed(1);
  PolicyModel model(smallConfig());
  torch::NoGradGuard ng;
  const auto tokens = torch::randint(4, 50, {3, 12}, torch::kLong);
  const auto pos = torch::arange(12, torch::kLong).expand({3, 12}).contiguous();
  const auto valid = torch::ones({3, 12}, torch::kBool);
  const auto full = model->forward(tokens, pos, valid);

  auto cache = model->newCache(3, 12);
  std::vector<torch::Tensor> parts{
      model->forwardCached(tokens.narrow(1, 0, 5), pos.narrow(1, 0, 5), valid.narrow(1, 0, 5), cache)};
  for (int t = 5; t < 12; ++t) {
    parts.push_back(model->forwardCached(tokens.narrow(1, t, 1), pos.narrow(1, t, 1), valid.narrow(1, t, 1), cache));
  }
  const auto cached = torch::cat(parts, 1);
  const double diff = (full - cached).abs().max().item<double>();
  RecordProperty("kv_cache_max_abs_logit_diff", std::to_string(diff));
  EXPECT_LT(diff, kTol) << "KV-cache logits differ from the full forward by " << diff;
  EXPECT_EQ(cache.length, 12);
}

TEST(PolicyModel, LeftPaddingDoesNotChangeARow) {
  torch::manual_seed(2);
  PolicyModel model(smallConfig());
  torch::NoGradGuard ng;
  const auto row = torch::randint(4, 50, {1, 6}, torch::kLong);
  auto [pos1, valid1] = positionsForLeftPadded(row, 0);
  const auto alone = model->forward(row, pos1, valid1);
  auto padded = torch::cat({torch::zeros({1, 4}, torch::kLong), row}, 1);
  auto [pos2, valid2] = positionsForLeftPadded(padded, 0);
  const auto in_batch = model->forward(padded, pos2, valid2).narrow(1, 4, 6);
  EXPECT_LT((alone - in_batch).abs().max().item<double>(), kTol);
}

TEST(PolicyModel, FutureTokensDoNotChangeEarlierLogits) {
  torch::manual_seed(3);
  PolicyModel model(smallConfig());
  torch::NoGradGuard ng;
  auto a = torch::randint(4, 50, {1, 8}, torch::kLong);
  auto b = a.clone();
  b[0][7] = (a[0][7].item<std::int64_t>() + 1) % 50;
  const auto pos = torch::arange(8, torch::kLong).unsqueeze(0);
  const auto valid = torch::ones({1, 8}, torch::kBool);
  const auto la = model->forward(a, pos, valid), lb = model->forward(b, pos, valid);
  EXPECT_LT((la.narrow(1, 0, 7) - lb.narrow(1, 0, 7)).abs().max().item<double>(), 1e-6);
  EXPECT_GT((la.narrow(1, 7, 1) - lb.narrow(1, 7, 1)).abs().max().item<double>(), 1e-4);
}

TEST(PolicyModel, Bf16ExportImportRoundTrip) {
  torch::manual_seed(4);
  PolicyModel a(smallConfig()), b(smallConfig());
  const auto exported = a->exportBf16();
  ASSERT_EQ(exported.size(), a->orderedParameters().size());
  // Hugging Face's names and state_dict order.
  EXPECT_EQ(exported.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(exported[1].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(exported.back().name, "model.norm.weight");  // tied: no lm_head.weight
  for (const auto& t : exported) EXPECT_EQ(t.tensor.scalar_type(), torch::kBFloat16) << t.name;
  b->importTensors(exported);
  for (std::size_t i = 0; i < exported.size(); ++i) {
    const auto& p = b->orderedParameters()[i];
    EXPECT_TRUE(torch::equal(p.tensor.to(torch::kBFloat16), exported[i].tensor)) << p.name;
  }
}

// An engine model whose weights a version fills (InitialWeights::FromStore): no weights drawn and
// none of their pages touched, placed in bf16 without a conversion; a version imported into it
// then gives what the same weights give elsewhere (the layers hold the reallocated parameters).
TEST(PolicyModel, AnUninitialisedModelTouchesNoWeightMemoryUntilAVersionFillsIt) {
  auto residentBytes = [] {
    long pages = 0, resident = 0;
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    if (f == nullptr || std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
    if (f != nullptr) std::fclose(f);
    return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
  };
  const auto big = test_support::tinyModel(32000, 1024, 4, 8, 4, 2816, 64);  // 80 M parameters, 320 MB in fp32
  const double before = residentBytes();
  PolicyModel model(big, /*uninitialised=*/true);
  model->placeUninitialised(torch::kCPU, torch::kBFloat16);
  const double grown = residentBytes() - before;
  EXPECT_LT(grown, 40e6) << "an uninitialised 80 M-parameter model made " << grown << " bytes resident";
  EXPECT_EQ(model->dtype(), torch::kBFloat16);
  for (const auto& p : model->orderedParameters()) EXPECT_EQ(p.tensor.scalar_type(), torch::kBFloat16) << p.name;

  torch::manual_seed(8);
  PolicyModel small(smallConfig(), /*uninitialised=*/true), source(smallConfig());
  small->placeUninitialised(torch::kCPU, torch::kBFloat16);
  small->importTensors(source->exportBf16());
  source->place(torch::kCPU, torch::kBFloat16);
  torch::NoGradGuard no_grad;
  const auto tokens = torch::randint(1, 50, {2, 7}, torch::kLong);
  const auto positions = torch::arange(7, torch::kLong).expand({2, 7});
  const auto valid = torch::ones({2, 7}, torch::kBool);
  EXPECT_TRUE(torch::equal(small->forward(tokens, positions, valid), source->forward(tokens, positions, valid)));
}

TEST(PolicyModel, ImportRefusesWrongShapeNamingTheTensor) {
  ModelConfig other = smallConfig();
  other.ffn_hidden = 96;
  PolicyModel a(smallConfig()), b(other);
  try {
    a->importTensors(b->exportBf16());
    FAIL() << "accepted tensors of another shape";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[96, 32]"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, RoundTripIsBitExactAndMismatchIsRefused) {
  const std::string dir = tempDir();
  const std::string path = dir + "/ckpt.h5";
  torch::manual_seed(5);
  PolicyModel a(smallConfig());
  saveCheckpointFile(path, "solver", *a, 7);
  torch::manual_seed(6);
  PolicyModel b(smallConfig());
  loadCheckpointFile(path, "solver", *b);
  for (std::size_t i = 0; i < a->orderedParameters().size(); ++i) {
    EXPECT_TRUE(torch::equal(a->orderedParameters()[i].tensor, b->orderedParameters()[i].tensor))
        << a->orderedParameters()[i].name;
  }
  EXPECT_EQ(io::H5File::openReadOnly(path).readInt64Attribute("version"), 7);

  ModelConfig bigger = smallConfig();
  bigger.d_model = 48;
  bigger.heads = 4;
  PolicyModel c(bigger);
  try {
    loadCheckpointFile(path, "solver", *c);
    FAIL() << "accepted a checkpoint of another model size";
  } catch (const Error& e) {
    // Head size differs: caught from the model attributes before any tensor is read.
    EXPECT_NE(std::string(e.what()).find("model attribute 'head_dim' is 8"), std::string::npos) << e.what();
  }
  ModelConfig wider = smallConfig();
  wider.ffn_hidden = 80;
  PolicyModel d(wider);
  try {
    loadCheckpointFile(path, "solver", *d);
    FAIL() << "accepted a checkpoint with another MLP size";
  } catch (const Error& e) {
    const std::string want = "tensor 'model.layers.0.mlp.gate_proj.weight' has shape [64,32]";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
  // A non-finite value in the last tensor is refused before any tensor is copied (the loader
  // reads a tensor at a time; a refused file leaves the model as it was).
  {
    torch::manual_seed(8);
    PolicyModel poisoned(smallConfig());
    {
      torch::NoGradGuard no_grad;
      poisoned->orderedParameters().back().tensor.view(-1)[3] = std::numeric_limits<float>::quiet_NaN();
    }
    const std::string bad = dir + "/nan.h5";
    saveCheckpointFile(bad, "solver", *poisoned, 8);
    torch::manual_seed(9);
    PolicyModel e(smallConfig());
    std::vector<torch::Tensor> before;
    for (const auto& p : e->orderedParameters()) before.push_back(p.tensor.clone());
    EXPECT_THROW(loadCheckpointFile(bad, "solver", *e), Error);
    for (std::size_t i = 0; i < before.size(); ++i) {
      EXPECT_TRUE(torch::equal(before[i], e->orderedParameters()[i].tensor)) << e->orderedParameters()[i].name;
    }
  }
  EXPECT_THROW(loadCheckpointFile(path, "verifier", *b), Error);
  EXPECT_THROW(loadCheckpointFile(dir + "/missing.h5", "solver", *b), Error);
  // A truncated file is refused, not crashed on.
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  EXPECT_THROW(loadCheckpointFile(path, "solver", *b), Error);
  std::filesystem::remove_all(dir);
}
