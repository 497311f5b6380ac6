// Activation checkpointing per transformer block: the forward runs the block without recording
// a graph and keeps only its input; the backward runs it again with the graph on and takes the
// gradients of the input and of the block's parameters from that (the reentrant scheme of
// torch.utils.checkpoint). Memory: one [B,T,D] tensor per block instead of every intermediate
// (attention scores, MLP activations); time: one more forward of each block per backward.
#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

#include "astraflow/model/policy_model.hpp"

namespace astraflow {

namespace {

class BlockCheckpoint : public torch::autograd::Function<BlockCheckpoint> {
 public:
  // The parameters are inputs so that autograd hands their gradients back to them; cos, sin and
  // the mask are constants (no gradient).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               torch::TensorList parameters, const torch::Tensor& cos, const torch::Tensor& sin,
                               const torch::Tensor& mask, const PolicyModelImpl* model, std::int64_t layer) {
    ctx->save_for_backward({x, cos, sin, mask});
    ctx->saved_data["model"] = reinterpret_cast<std::int64_t>(model);
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["parameters"] = static_cast<std::int64_t>(parameters.size());
    // The recomputation must take the forward's autocast state (the backward runs outside it).
    const auto type = x.device().type();
    ctx->saved_data["autocast"] = at::autocast::is_autocast_enabled(type);
    ctx->saved_data["autocast_dtype"] = static_cast<std::int64_t>(at::autocast::get_autocast_dtype(type));
    return model->block(static_cast<std::size_t>(layer), x, cos, sin, mask, nullptr);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const auto* model = reinterpret_cast<const PolicyModelImpl*>(ctx->saved_data["model"].toInt());
    const auto layer = static_cast<std::size_t>(ctx->saved_data["layer"].toInt());
    const auto x = saved[0].detach().requires_grad_(true);
    const auto type = x.device().type();
    const bool was_enabled = at::autocast::is_autocast_enabled(type);
    const auto was_dtype = at::autocast::get_autocast_dtype(type);
    const bool autocast = ctx->saved_data["autocast"].toBool();
    at::autocast::set_autocast_enabled(type, autocast);
    at::autocast::set_autocast_dtype(type, static_cast<at::ScalarType>(ctx->saved_data["autocast_dtype"].toInt()));
    torch::autograd::variable_list grads;
    try {
      const torch::AutoGradMode grad_on(true);
      const auto y = model->block(layer, x, saved[1], saved[2], saved[3], nullptr);
      // The live parameters, not copies: autocast's cached bf16 casts of them are reused.
      std::vector<torch::Tensor> inputs{x};
      for (const auto& p : model->blockParameters(layer)) inputs.push_back(p);
      grads = torch::autograd::grad({y}, inputs, {grad_out[0]}, /*retain_graph=*/false, /*create_graph=*/false,
                                    /*allow_unused=*/true);
    } catch (...) {
      at::autocast::set_autocast_enabled(type, was_enabled);
      at::autocast::set_autocast_dtype(type, was_dtype);
      throw;
    }
    at::autocast::set_autocast_enabled(type, was_enabled);
    at::autocast::set_autocast_dtype(type, was_dtype);
    // One gradient per forward input: x, each parameter, then none for cos, sin, mask and the
    // two non-tensor arguments.
    grads.resize(grads.size() + 5);
    return grads;
  }
};

}  // namespace

torch::Tensor checkpointedBlock(const PolicyModelImpl& model, std::size_t layer, const torch::Tensor& x,
                                const torch::Tensor& cos, const torch::Tensor& sin, const torch::Tensor& mask) {
  const auto parameters = model.blockParameters(layer);
  return BlockCheckpoint::apply(x, torch::TensorList(parameters), cos, sin, mask, &model,
                                static_cast<std::int64_t>(layer));
}

}  // namespace astraflow
