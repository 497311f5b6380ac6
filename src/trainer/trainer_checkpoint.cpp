// saveTrainerCheckpoint / loadTrainerCheckpoint: a trainer group's fp32 master weights and AdamW state in
// checkpoints/step_<V>.<policy>.h5, gathered from the shards (or split back into them) when training is sharded.
#include "astraflow/trainer/trainer_checkpoint.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <span>
#include <system_error>

#include "astraflow/io/h5.hpp"
#include "astraflow/model/checkpoint.hpp"
#include "astraflow/trainer/policy_trainer.hpp"

namespace astraflow {

namespace {

// The optimiser keys a parameter's state by its TensorImpl (LibTorch 2.x: the pointer itself).
void* stateKey(const torch::Tensor& p) { return p.unsafeGetTensorImpl(); }

void writeTensor(const io::H5Location& group, const std::string& name, const torch::Tensor& t) {
  const auto flat = t.detach().to(torch::kCPU, torch::kFloat32).contiguous().view(-1);
  group.writeVector(name, std::span<const float>(flat.data_ptr<float>(), static_cast<std::size_t>(flat.numel())));
}

// A parameter's fp32 dataset of `shape`, on `device`.
torch::Tensor readTensor(const io::H5Location& group, const std::string& name, torch::IntArrayRef shape,
                         const torch::Device& device) {
  const auto values = group.readVector<float>(name);
  const auto numel = c10::multiply_integers(shape);
  if (static_cast<std::int64_t>(values.size()) != numel) {
    throw Error(
        fmt::format("dataset {}/{} holds {} values, the parameter has {}", group.name(), name, values.size(), numel));
  }
  return torch::from_blob(const_cast<float*>(values.data()), shape, torch::kFloat32).to(device, false, true);
}

}  // namespace

std::uint64_t saveTrainerCheckpoint(const std::string& path, const std::string& policy, PolicyTrainer& trainer,
                                    std::int64_t version, const std::string& run_id) {
  ZeroOptimizer* zero = trainer.zero();
  const std::size_t params = trainer.model()->orderedParameters().size();
  if (zero && zero->rank() != 0) {
    // Rank 0 writes; the others hand it their pieces of each sharded weight and of each
    // parameter's state, in order.
    if (zero->shardsParameters()) {
      for (std::size_t i = 0; i < params; ++i) zero->gatherParameter(i);
    }
    if (zero->steps() > 0) {
      for (std::size_t i = 0; i < params; ++i) {
        zero->gatherState(i, ZeroOptimizer::Moment::ExpAvg);
        zero->gatherState(i, ZeroOptimizer::Moment::ExpAvgSq);
      }
    }
    return 0;
  }
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  const std::string tmp = path + ".tmp";
  {
    auto file = io::H5File::create(tmp);
    file.writeAttribute("format", "astraflow-checkpoint");
    file.writeAttribute("part", "trainer");
    file.writeAttribute("policy", policy);
    if (!run_id.empty()) file.writeAttribute("run_id", run_id);
    file.writeAttribute("version", version);
    auto group = file.createGroup("policies/" + policy);
    if (zero && zero->shardsParameters()) {
      // A parameter at a time from the shards: no whole fp32 model on rank 0.
      saveModelWeights(group, *trainer.model(), [&](std::size_t i) { return zero->gatherParameter(i); });
    } else {
      saveModelWeights(group, *trainer.model());
    }
    auto opt = group.createGroup("optimizer");
    auto& state = trainer.optimizer().state();
    const auto named = trainer.model()->orderedParameters();
    for (std::size_t i = 0; i < params; ++i) {
      const auto& [name, param] = named[i];
      if (zero) {
        // ZeRO-1: the state gathered from the shards, written as the unsharded trainer writes it,
        // so a checkpoint resumes with any group size, sharded or not.
        if (zero->steps() == 0) break;  // no step taken yet
        auto g = opt.createGroup(name);
        g.writeAttribute("step", zero->steps());
        writeTensor(g, "exp_avg", zero->gatherState(i, ZeroOptimizer::Moment::ExpAvg));
        writeTensor(g, "exp_avg_sq", zero->gatherState(i, ZeroOptimizer::Moment::ExpAvgSq));
        continue;
      }
      auto it = state.find(stateKey(param));
      if (it == state.end()) continue;  // no step taken yet for this parameter
      auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
      auto g = opt.createGroup(name);
      g.writeAttribute("step", static_cast<std::int64_t>(s.step()));
      writeTensor(g, "exp_avg", s.exp_avg());
      writeTensor(g, "exp_avg_sq", s.exp_avg_sq());
    }
    file.flush();
  }
  std::filesystem::rename(tmp, path);
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  return ec ? 0 : bytes;
}

std::uint64_t trainerCheckpointBytes(PolicyTrainer& trainer) {
  const auto& model = *trainer.model();
  const auto tensors = model.orderedParameters().size();
  std::uint64_t values = 0;  // the whole parameters' (parameterShape: the full one, sharded or not)
  for (std::size_t i = 0; i < tensors; ++i)
    values += static_cast<std::uint64_t>(c10::multiply_integers(model.parameterShape(i)));
  const std::uint64_t per_value = trainer.optimizerSteps() > 0 ? 12 : 4;  // weights, then m and v
  // HDF5: a few KiB per dataset and group (object headers, the shape attribute), and the file's own.
  return values * per_value + tensors * 3 * 8192 + (std::uint64_t{1} << 20);
}

std::int64_t loadTrainerCheckpoint(const std::string& path, const std::string& policy, PolicyTrainer& trainer) {
  try {
    auto file = io::H5File::openReadOnly(path);
    if (!file.hasAttribute("part") || file.readStringAttribute("part") != "trainer") {
      throw Error("attribute part: not a trainer checkpoint");
    }
    const std::int64_t version = file.readInt64Attribute("version");
    if (!file.exists("policies/" + policy)) throw Error(fmt::format("group policies/{} is missing", policy));
    auto group = file.openGroup("policies/" + policy);
    loadModelWeights(group, *trainer.model());
    auto opt = group.openGroup("optimizer");
    auto& state = trainer.optimizer().state();
    torch::NoGradGuard no_grad;
    const auto named = trainer.model()->orderedParameters();
    for (std::size_t i = 0; i < named.size(); ++i) {
      const auto& [name, param] = named[i];
      if (!opt.exists(name)) continue;
      auto g = opt.openGroup(name);
      const auto shape = trainer.model()->parameterShape(i);
      const auto device = trainer.model()->device();
      if (ZeroOptimizer* zero = trainer.zero()) {  // this rank's piece of the full state
        zero->loadState(i, readTensor(g, "exp_avg", shape, device), readTensor(g, "exp_avg_sq", shape, device),
                        g.readInt64Attribute("step"));
        continue;
      }
      auto s = std::make_unique<torch::optim::AdamWParamState>();
      s->step(g.readInt64Attribute("step"));
      s->exp_avg(readTensor(g, "exp_avg", shape, device));
      s->exp_avg_sq(readTensor(g, "exp_avg_sq", shape, device));
      state[stateKey(param)] = std::move(s);
    }
    return version;
  } catch (const std::exception& e) {
    throw Error(fmt::format("cannot resume from trainer checkpoint {}: {}", path, e.what()));
  }
}

}  // namespace astraflow
