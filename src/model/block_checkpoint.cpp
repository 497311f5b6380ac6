// Activation checkpointing per transformer block: the forward runs the block without recording
// a graph and keeps only its input; the backward runs it again with the graph on and takes the
// gradients of the input and of the block's parameters from that (the reentrant scheme of
// torch.utils.checkpoint). Memory: one [B,T,D] tensor per block instead of every intermediate
// (attention scores, MLP activations); time: one more forward of each block per backward.
#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

#include "astraflow/model/policy_model.hpp"
#include "model/autocast_guards.hpp"

namespace astraflow {

namespace {

// The block's constant inputs kept for its recomputation: x, the rotary tables and the attention
// input (its mask or spans; an undefined one is saved as such).
void saveAttention(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos,
                   const torch::Tensor& sin, const AttentionInput& attention) {
  ctx->save_for_backward({x, cos, sin, attention.mask, attention.spans});
  ctx->saved_data["attention_form"] = static_cast<std::int64_t>(attention.form);
}

AttentionInput savedAttention(torch::autograd::AutogradContext* ctx, const torch::autograd::variable_list& saved) {
  return {static_cast<AttentionForm>(ctx->saved_data["attention_form"].toInt()), saved[3], saved[4]};
}

class BlockCheckpoint : public torch::autograd::Function<BlockCheckpoint> {
 public:
  // The parameters are inputs so that autograd hands their gradients back to them; cos, sin and
  // the mask are constants (no gradient).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               torch::TensorList parameters, const torch::Tensor& cos, const torch::Tensor& sin,
                               const AttentionInput& attention, const PolicyModelImpl* model, std::int64_t layer) {
    saveAttention(ctx, x, cos, sin, attention);
    ctx->saved_data["model"] = reinterpret_cast<std::int64_t>(model);
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["parameters"] = static_cast<std::int64_t>(parameters.size());
    // The recomputation must take the forward's autocast state (the backward runs outside it).
    const auto type = x.device().type();
    ctx->saved_data["autocast"] = at::autocast::is_autocast_enabled(type);
    ctx->saved_data["autocast_dtype"] = static_cast<std::int64_t>(at::autocast::get_autocast_dtype(type));
    return model->block(static_cast<std::size_t>(layer), x, cos, sin, attention, nullptr);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const auto* model = reinterpret_cast<const PolicyModelImpl*>(ctx->saved_data["model"].toInt());
    const auto layer = static_cast<std::size_t>(ctx->saved_data["layer"].toInt());
    const auto x = saved[0].detach().requires_grad_(true);
    torch::autograd::variable_list grads;
    {
      const AutocastAs autocast(x.device().type(), ctx->saved_data["autocast"].toBool(),
                                static_cast<at::ScalarType>(ctx->saved_data["autocast_dtype"].toInt()));
      const torch::AutoGradMode grad_on(true);
      const auto y = model->block(layer, x, saved[1], saved[2], savedAttention(ctx, saved), nullptr);
      // The live parameters, not copies: autocast's cached bf16 casts of them are reused.
      std::vector<torch::Tensor> inputs{x};
      for (const auto& p : model->blockParameters(layer)) inputs.push_back(p);
      grads = torch::autograd::grad({y}, inputs, {grad_out[0]}, /*retain_graph=*/false, /*create_graph=*/false,
                                    /*allow_unused=*/true);
    }
    // One gradient per forward input: x, each parameter, then none for cos, sin, mask and the
    // two non-tensor arguments.
    grads.resize(grads.size() + 5);
    return grads;
  }
};

// The same recomputation with the block's weights held in shards (parameter sharding): they are
// gathered for the forward and released before it returns, gathered again for the backward's
// recomputation, and their gradients go to the shards rather than to autograd (the weights are
// not inputs of this function, so autograd never accumulates into them).
class ShardedBlock : public torch::autograd::Function<ShardedBlock> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos,
                               const torch::Tensor& sin, const AttentionInput& attention, const PolicyModelImpl* model,
                               ParameterShards* shards, std::int64_t layer) {
    saveAttention(ctx, x, cos, sin, attention);
    ctx->saved_data["model"] = reinterpret_cast<std::int64_t>(model);
    ctx->saved_data["shards"] = reinterpret_cast<std::int64_t>(shards);
    ctx->saved_data["layer"] = layer;
    const auto type = x.device().type();
    ctx->saved_data["autocast"] = at::autocast::is_autocast_enabled(type);
    ctx->saved_data["autocast_dtype"] = static_cast<std::int64_t>(at::autocast::get_autocast_dtype(type));
    shards->gather(static_cast<std::size_t>(layer));
    auto y = model->block(static_cast<std::size_t>(layer), x, cos, sin, attention, nullptr);
    shards->release(static_cast<std::size_t>(layer));
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const auto* model = reinterpret_cast<const PolicyModelImpl*>(ctx->saved_data["model"].toInt());
    auto* shards = reinterpret_cast<ParameterShards*>(ctx->saved_data["shards"].toInt());
    const auto layer = static_cast<std::size_t>(ctx->saved_data["layer"].toInt());
    const auto x = saved[0].detach().requires_grad_(true);
    shards->gather(layer);
    const auto parameters = model->blockParameters(layer);
    torch::autograd::variable_list grads;
    {
      const AutocastAs autocast(x.device().type(), ctx->saved_data["autocast"].toBool(),
                                static_cast<at::ScalarType>(ctx->saved_data["autocast_dtype"].toInt()));
      const NoCastCache no_cache;  // the weights are gathered afresh: no cast of them may be kept
      const torch::AutoGradMode grad_on(true);
      const auto y = model->block(layer, x, saved[1], saved[2], savedAttention(ctx, saved), nullptr);
      std::vector<torch::Tensor> inputs{x};
      inputs.insert(inputs.end(), parameters.begin(), parameters.end());
      grads = torch::autograd::grad({y}, inputs, {grad_out[0]}, /*retain_graph=*/false, /*create_graph=*/false,
                                    /*allow_unused=*/true);
    }
    shards->reduceGradients(layer, std::vector<torch::Tensor>(grads.begin() + 1, grads.end()));
    shards->release(layer);
    // x's gradient; none for cos, sin, mask and the three non-tensor arguments.
    return {grads[0], {}, {}, {}, {}, {}, {}};
  }
};

}  // namespace

torch::Tensor shardedBlock(const PolicyModelImpl& model, ParameterShards& shards, std::size_t layer,
                           const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                           const AttentionInput& attention) {
  return ShardedBlock::apply(x, cos, sin, attention, &model, &shards, static_cast<std::int64_t>(layer));
}

torch::Tensor checkpointedBlock(const PolicyModelImpl& model, std::size_t layer, const torch::Tensor& x,
                                const torch::Tensor& cos, const torch::Tensor& sin, const AttentionInput& attention) {
  const auto parameters = model.blockParameters(layer);
  return BlockCheckpoint::apply(x, torch::TensorList(parameters), cos, sin, attention, &model,
                                static_cast<std::int64_t>(layer));
}

}  // namespace astraflow
