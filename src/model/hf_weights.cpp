// loadHfWeights: a Hugging Face folder's safetensors (shards included) into a policy model, each tensor checked for
// name, shape and finite values before anything is copied; writeHfWeights writes them back, fp32 or bf16.
#include "astraflow/model/hf_weights.hpp"

#include <fmt/format.h>
#include <torch/types.h>

#include <cstring>
#include <map>
#include <string>

#include "astraflow/core/error.hpp"
#include "astraflow/io/safetensors.hpp"
#include "astraflow/model/finite_values.hpp"

namespace astraflow {

namespace {

torch::ScalarType torchDtype(const io::StTensorView& t, const std::filesystem::path& folder) {
  switch (t.dtype) {
    case io::StDtype::F32: return torch::kFloat32;
    case io::StDtype::F16: return torch::kFloat16;
    case io::StDtype::BF16: return torch::kBFloat16;
    case io::StDtype::F64: return torch::kFloat64;
    default:
      throw Error(fmt::format("{}: tensor '{}' is {}; a model weight must be F32, F16, BF16 or F64", folder.string(),
                              t.name, io::dtypeName(t.dtype)));
  }
}

// A tensor over the mapped bytes (read only: the model copies out of it).
torch::Tensor viewOf(const io::StTensorView& t, const std::filesystem::path& folder) {
  auto* data = const_cast<std::byte*>(t.bytes.data());
  return torch::from_blob(data, t.shape, torch::TensorOptions().dtype(torchDtype(t, folder)));
}

bool allFinite(const io::StTensorView& t) {
  switch (t.dtype) {
    case io::StDtype::F32: return allFiniteBits(t.bytes, FloatBits::F32);
    case io::StDtype::BF16: return allFiniteBits(t.bytes, FloatBits::BF16);
    case io::StDtype::F16: return allFiniteBits(t.bytes, FloatBits::F16);
    case io::StDtype::F64: return allFiniteBits(t.bytes, FloatBits::F64);
    default: return true;  // refused by torchDtype before
  }
}

}  // namespace

void loadHfWeights(PolicyModelImpl& model, const std::filesystem::path& folder) {
  const auto checkpoint = io::SafetensorsCheckpoint::open(folder);
  std::vector<NamedTensor> tensors;
  tensors.reserve(checkpoint.tensors().size());
  const io::StTensorView* tied_head = nullptr;
  for (const io::StTensorView* t : checkpoint.tensors()) {
    if (model.config().tied_embeddings && t->name == "lm_head.weight") {
      tied_head = t;
      continue;
    }
    tensors.push_back({t->name, viewOf(*t, folder)});
  }
  if (tied_head) {
    // transformers ties the head to the embeddings and drops a stored copy; a copy that is not
    // equal would be silently lost there, so it is refused here.
    const io::StTensorView* embed = checkpoint.find("model.embed_tokens.weight");
    if (!embed || !torch::equal(viewOf(*tied_head, folder), viewOf(*embed, folder))) {
      throw Error(
          fmt::format("{}: config.json ties the embeddings (tie_word_embeddings) but lm_head.weight differs "
                      "from model.embed_tokens.weight",
                      folder.string()));
    }
  }
  // Tensor by tensor, releasing each one's mapped pages once read: the process then holds the
  // model plus about one tensor of the files, not the files whole (docs/models.md, the load
  // benchmark). Values are checked in a first pass, so nothing is copied unless all pass.
  try {
    const auto index = model.matchTensors(tensors);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const io::StTensorView& view = *checkpoint.find(tensors[i].name);
      if (!allFinite(view)) throw Error(fmt::format("weights: tensor '{}' holds NaN or inf values", view.name));
      checkpoint.releasePages(view);
    }
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      model.copyInto(index[i], tensors[i].tensor);
      checkpoint.releasePages(*checkpoint.find(tensors[i].name));
    }
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", folder.string(), e.what()));
  }
}

std::vector<std::filesystem::path> writeHfWeights(const PolicyModelImpl& model, const std::filesystem::path& folder,
                                                  bool bf16, std::uint64_t max_shard_bytes) {
  // Each parameter is converted straight into the writer's buffer when the writer reaches it:
  // one parameter's bytes at a time, not a converted copy of the whole model.
  const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat32;
  std::vector<io::StTensorSource> sources;
  for (const auto& p : model.orderedParameters()) {
    io::StTensorSource s;
    s.name = p.name;
    s.dtype = bf16 ? io::StDtype::BF16 : io::StDtype::F32;
    s.shape.assign(p.tensor.sizes().begin(), p.tensor.sizes().end());
    s.fill = [tensor = p.tensor, dtype](std::span<std::byte> out) {
      torch::NoGradGuard no_grad;
      torch::from_blob(out.data(), tensor.sizes(), torch::TensorOptions().dtype(dtype)).copy_(tensor.detach());
    };
    sources.push_back(std::move(s));
  }
  return io::writeSafetensorsCheckpoint(folder, sources, max_shard_bytes, {{"format", "pt"}});
}

}  // namespace astraflow
