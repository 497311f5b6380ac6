// loadHfWeights: a Hugging Face folder's safetensors (shards included) into a policy model, copied or mapped, each
// tensor checked for name, shape and finite values before any is loaded; writeHfWeights writes them back, fp32 or bf16.
#include "astraflow/model/hf_weights.hpp"

#include <fmt/format.h>
#include <torch/types.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
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

// A tensor over the mapped bytes (the model copies out of it, or adopts it: HfLoad::Map).
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

// Every tensor has its parameter's dtype and the alignment of its elements, and the model holds
// its weights itself: the parameters can be the mapped bytes.
bool mappable(const PolicyModelImpl& model, const std::vector<NamedTensor>& tensors,
              const std::vector<std::size_t>& index) {
  if (model.parameterShards()) return false;
  const auto params = model.orderedParameters();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i].tensor;
    const auto& p = params[index[i]].tensor;
    if (t.scalar_type() != p.scalar_type() || p.device() != torch::Device(torch::kCPU)) return false;
    if (reinterpret_cast<std::uintptr_t>(t.data_ptr()) % t.element_size() != 0) return false;
  }
  return true;
}

// The parameters become tensors over the map, each holding the checkpoint (its maps) alive;
// adoptTensors reads each once for its finiteness, all before any is adopted. The pages read are
// then let go (the model has written none yet): they come back from the page cache when used.
void adoptMapped(PolicyModelImpl& model, const std::shared_ptr<const io::SafetensorsCheckpoint>& checkpoint,
                 const std::vector<NamedTensor>& views) {
  std::vector<NamedTensor> mapped;
  mapped.reserve(views.size());
  for (const auto& v : views) {
    mapped.push_back({v.name, torch::from_blob(
                                  v.tensor.data_ptr(), v.tensor.sizes(), [checkpoint](void*) {},
                                  torch::TensorOptions().dtype(v.tensor.scalar_type()))});
  }
  model.adoptTensors(mapped);
  for (const auto& v : views) checkpoint->releasePages(*checkpoint->find(v.name));
}

// Tensor by tensor, releasing each one's mapped pages once read: the process then holds the
// model plus about one tensor of the files, not the files whole (docs/models.md, the load
// benchmark). Values are checked in a first pass, so nothing is copied unless all pass.
void copyStreaming(PolicyModelImpl& model, const io::SafetensorsCheckpoint& checkpoint,
                   const std::vector<NamedTensor>& tensors, const std::vector<std::size_t>& index) {
  for (const auto& t : tensors) {
    const io::StTensorView& view = *checkpoint.find(t.name);
    if (!allFinite(view)) throw Error(fmt::format("weights: tensor '{}' holds NaN or inf values", view.name));
    checkpoint.releasePages(view);
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    model.copyInto(index[i], tensors[i].tensor);
    checkpoint.releasePages(*checkpoint.find(tensors[i].name));
  }
}

}  // namespace

bool loadHfWeights(PolicyModelImpl& model, const std::filesystem::path& folder, HfLoad how) {
  // Shared: mapped parameters keep the files' maps alive.
  const auto checkpoint = std::make_shared<const io::SafetensorsCheckpoint>(io::SafetensorsCheckpoint::open(folder));
  std::vector<NamedTensor> tensors;
  tensors.reserve(checkpoint->tensors().size());
  const io::StTensorView* tied_head = nullptr;
  for (const io::StTensorView* t : checkpoint->tensors()) {
    if (model.config().tied_embeddings && t->name == "lm_head.weight") {
      tied_head = t;
      continue;
    }
    tensors.push_back({t->name, viewOf(*t, folder)});
  }
  if (tied_head) {
    // transformers ties the head to the embeddings and drops a stored copy; a copy that is not
    // equal would be silently lost there, so it is refused here.
    const io::StTensorView* embed = checkpoint->find("model.embed_tokens.weight");
    if (!embed || !torch::equal(viewOf(*tied_head, folder), viewOf(*embed, folder))) {
      throw Error(
          fmt::format("{}: config.json ties the embeddings (tie_word_embeddings) but lm_head.weight differs "
                      "from model.embed_tokens.weight",
                      folder.string()));
    }
  }
  try {
    const auto index = model.matchTensors(tensors);
    if (how == HfLoad::Map && mappable(model, tensors, index)) {
      adoptMapped(model, checkpoint, tensors);
      return true;
    }
    copyStreaming(model, *checkpoint, tensors, index);
    return false;
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", folder.string(), e.what()));
  }
}

std::vector<std::filesystem::path> writeHfWeights(const PolicyModelImpl& model, const std::filesystem::path& folder,
                                                  bool bf16, std::uint64_t max_shard_bytes, HfHead head) {
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
    if (head == HfHead::Separate && model.config().tied_embeddings && p.name == "model.embed_tokens.weight") {
      io::StTensorSource head_copy = sources.back();
      head_copy.name = "lm_head.weight";
      sources.push_back(std::move(head_copy));
    }
  }
  return io::writeSafetensorsCheckpoint(folder, sources, max_shard_bytes, {{"format", "pt"}});
}

}  // namespace astraflow
