// Token log-probs from hidden states in chunks of rows (the trainer's and the scorer's; see the
// header). The forward keeps only its inputs; the backward recomputes each chunk's logits under
// the forward's autocast state and forms their gradient in place, so a chunk's float32 [rows, V]
// logits are the largest transient either way, beside the weight's one gradient.
#include "astraflow/model/chunked_logprobs.hpp"

#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "model/autocast_guards.hpp"

namespace astraflow {

namespace {

// One chunk, exactly as the unchunked path computes it: projection, float32, −inf for the
// never-generated ids, temperature, log-softmax, gather.
torch::Tensor chunkLogProbs(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                            const torch::Tensor& never_generate, double temperature) {
  auto logits = torch::linear(hidden, weight).to(torch::kFloat32);
  if (never_generate.numel() > 0)
    logits = logits.index_fill(-1, never_generate, -std::numeric_limits<float>::infinity());
  if (temperature != 1.0) logits = logits / temperature;
  return logits.log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1);
}

// Chunks of nearly equal size (at most chunk_rows each): no small remainder chunk, whose
// matrix products BLAS takes by another path (matrix-vector below a few rows) with a different
// summation order — measured 4x the rounding error of the whole product at 151,936 columns.
std::vector<std::pair<std::int64_t, std::int64_t>> chunksOf(std::int64_t rows, std::int64_t chunk_rows) {
  const auto chunks = std::max<std::int64_t>(1, (rows + chunk_rows - 1) / chunk_rows);
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::int64_t c = 0, start = 0; c < chunks; ++c) {
    const auto n = rows / chunks + (c < rows % chunks ? 1 : 0);
    out.emplace_back(start, n);
    start += n;
  }
  return out;
}

class ChunkedLogProbs : public torch::autograd::Function<ChunkedLogProbs> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const torch::Tensor& targets,
                               const torch::Tensor& never_generate, double temperature, std::int64_t chunk_rows,
                               const c10::intrusive_ptr<TiedGradient>& tied) {
    ctx->save_for_backward({hidden, weight, targets, never_generate});
    if (tied) ctx->saved_data["tied"] = c10::IValue::make_capsule(tied);
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["chunk_rows"] = chunk_rows;
    // The backward runs outside the forward's autocast scope; its recomputation must cast as this did.
    const auto type = hidden.device().type();
    ctx->saved_data["autocast"] = at::autocast::is_autocast_enabled(type);
    ctx->saved_data["autocast_dtype"] = static_cast<std::int64_t>(at::autocast::get_autocast_dtype(type));
    const auto N = hidden.size(0);
    auto out = torch::empty({N}, hidden.options().dtype(torch::kFloat32));
    for (const auto& [s, n] : chunksOf(N, chunk_rows)) {
      out.narrow(0, s, n).copy_(
          chunkLogProbs(hidden.narrow(0, s, n), weight, targets.narrow(0, s, n), never_generate, temperature));
    }
    return out;
  }

  // By hand, one chunk at a time: recompute the chunk's float32 logits, turn them into the
  // softmax in place, and from it the logits' gradient g·(onehot(target) − softmax)/temperature,
  // again in place; then the two products that take it back through the projection. The weight's
  // gradient is summed into one buffer with addmm (no [V, D] gradient per chunk beside it), and no
  // autograd graph is built for the recomputation.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const auto& hidden = saved[0];
    const auto& weight = saved[1];  // the live parameter: autocast's cached cast of it is reused
    const auto& targets = saved[2];
    const auto& never = saved[3];
    const auto temperature = ctx->saved_data["temperature"].toDouble();
    const auto chunk_rows = ctx->saved_data["chunk_rows"].toInt();
    const bool want_hidden = ctx->needs_input_grad(0), want_weight = ctx->needs_input_grad(1);
    const auto type = hidden.device().type();
    const bool autocast_on = ctx->saved_data["autocast"].toBool();
    const auto autocast_dtype = static_cast<at::ScalarType>(ctx->saved_data["autocast_dtype"].toInt());
    const bool create_graph = torch::GradMode::is_enabled();
    const AutocastAs autocast(type, autocast_on, autocast_dtype);
    const torch::NoGradGuard no_grad;
    // The dtype the forward's projection ran in, and the weight as it used it (autocast's cache).
    const auto w = autocast_on ? at::autocast::cached_cast(autocast_dtype, weight, type) : weight;
    const auto compute = w.scalar_type();
    const auto N = hidden.size(0);
    const auto g = grad_out[0].to(torch::kFloat32);
    torch::Tensor grad_hidden = want_hidden ? torch::empty_like(hidden) : torch::Tensor();
    const bool tied = ctx->saved_data.count("tied") != 0;
    // A tied matrix with its .grad in place: the products go straight into it (TiedGradient).
    const auto& existing = weight.grad();
    const bool into_grad = want_weight && tied && !create_graph && existing.defined() &&
                           existing.sizes() == weight.sizes() && existing.scalar_type() == weight.scalar_type() &&
                           existing.device() == weight.device() && existing.is_contiguous();
    torch::Tensor grad_weight = into_grad ? existing : want_weight ? torch::zeros_like(weight) : torch::Tensor();
    for (const auto& [s, n] : chunksOf(N, chunk_rows)) {
      const auto h = hidden.narrow(0, s, n).to(compute);
      auto grad_logits = torch::linear(h, w).to(torch::kFloat32);
      if (never.numel() > 0) grad_logits.index_fill_(-1, never, -std::numeric_limits<float>::infinity());
      if (temperature != 1.0) grad_logits.div_(temperature);
      const auto lse = grad_logits.logsumexp(-1, /*keepdim=*/true);
      const auto gn = g.narrow(0, s, n).unsqueeze(-1);
      grad_logits.sub_(lse).exp_().mul_(gn.neg());  // −g·softmax
      grad_logits.scatter_add_(-1, targets.narrow(0, s, n).unsqueeze(-1), gn);
      // Never-generated ids are constants (−inf) in the forward: no gradient reaches them.
      if (never.numel() > 0) grad_logits.index_fill_(-1, never, 0.0);
      if (temperature != 1.0) grad_logits.div_(temperature);
      const auto grad_z = grad_logits.to(compute);
      if (want_hidden) grad_hidden.narrow(0, s, n).copy_(torch::mm(grad_z, w));
      if (want_weight) {
        if (grad_weight.scalar_type() == compute) {
          grad_weight.addmm_(grad_z.t(), h);
        } else {
          grad_weight.add_(torch::mm(grad_z.t(), h));  // autocast: the product in its dtype, summed in the weight's
        }
      }
    }
    // A tied matrix: the embedding's backward, which runs after this one, hands the sum on (or
    // adds into the same .grad).
    if (want_weight && tied) {
      auto slot = c10::static_intrusive_pointer_cast<TiedGradient>(ctx->saved_data["tied"].toCapsule());
      slot->in_grad = into_grad;
      slot->sum = into_grad ? torch::Tensor() : std::move(grad_weight);
      grad_weight = torch::Tensor();
    }
    // One gradient per forward input: hidden, weight, then none for the targets, the ids and the
    // three non-tensor arguments.
    return {grad_hidden,     grad_weight,     torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

class TiedEmbeddingLookup : public torch::autograd::Function<TiedEmbeddingLookup> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& weight,
                               const torch::Tensor& tokens, const c10::intrusive_ptr<TiedGradient>& tied) {
    ctx->save_for_backward({tokens, weight});
    ctx->saved_data["tied"] = c10::IValue::make_capsule(tied);
    ctx->saved_data["rows"] = weight.size(0);
    ctx->saved_data["dtype"] = static_cast<std::int64_t>(weight.scalar_type());
    return torch::embedding(weight, tokens);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto tied = c10::static_intrusive_pointer_cast<TiedGradient>(ctx->saved_data["tied"].toCapsule());
    torch::Tensor sum = std::move(tied->sum);
    tied->sum = torch::Tensor();
    const auto& grad = grad_out[0];
    const auto D = grad.size(-1);
    const auto saved = ctx->get_saved_variables();
    const torch::NoGradGuard no_grad;
    if (tied->in_grad) {  // the head added into .grad: so do these rows, and autograd gets nothing
      tied->in_grad = false;
      auto target = saved[1].grad();
      target.index_add_(0, saved[0].reshape({-1}), grad.reshape({-1, D}).to(target.scalar_type()));
      return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    if (!sum.defined()) {
      sum = torch::zeros({ctx->saved_data["rows"].toInt(), D},
                         grad.options().dtype(static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt())));
    }
    sum.index_add_(0, saved[0].reshape({-1}), grad.reshape({-1, D}).to(sum.scalar_type()));
    return {sum, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor tiedEmbedding(const torch::Tensor& weight, const torch::Tensor& tokens,
                            const c10::intrusive_ptr<TiedGradient>& tied) {
  if (!tied) return torch::embedding(weight, tokens);
  return TiedEmbeddingLookup::apply(weight, tokens, tied);
}

std::int64_t logitsChunkRows(std::int64_t rows, std::int64_t vocab, std::int64_t chunk_bytes) {
  const auto all = std::max<std::int64_t>(1, rows);
  if (chunk_bytes <= 0 || vocab <= 0) return all;
  const auto per_row = vocab * static_cast<std::int64_t>(sizeof(float));
  // At least kMinChunkRows: below a few rows BLAS multiplies matrix by vector, summing the
  // vocabulary in another order than the whole product does (see chunksOf).
  return std::min(all, std::max(kMinChunkRows, chunk_bytes / per_row));
}

torch::Tensor chunkedTokenLogProbs(const torch::Tensor& hidden, const torch::Tensor& targets, const OutputHead& head,
                                   std::int64_t chunk_rows) {
  if (!hidden.defined() || hidden.dim() != 2) throw std::invalid_argument("chunkedTokenLogProbs: hidden must be [N,D]");
  if (!head.weight.defined() || head.weight.dim() != 2 || head.weight.size(1) != hidden.size(1))
    throw std::invalid_argument("chunkedTokenLogProbs: the head's weight must be [V,D] with hidden's D");
  if (!targets.defined() || targets.dim() != 1 || targets.size(0) != hidden.size(0) ||
      targets.scalar_type() != torch::kLong)
    throw std::invalid_argument("chunkedTokenLogProbs: targets must be [N] int64 for hidden's N rows");
  if (!(head.temperature > 0)) throw std::invalid_argument("chunkedTokenLogProbs: temperature must be > 0");
  const auto rows = std::max<std::int64_t>(1, chunk_rows);
  // An undefined tensor is no Function input (autograd asks every input for its device).
  const auto never = head.never_generate.defined() ? head.never_generate : torch::empty({0}, targets.options());
  return ChunkedLogProbs::apply(hidden, head.weight, targets, never, head.temperature, rows, head.tied);
}

}  // namespace astraflow
