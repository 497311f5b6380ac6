// sampleRows: one token per row from a step's logits, each row with its own temperature, top-p, masked ids and
// uniform draw (inverse CDF in float64), so a row's token never depends on the rows beside it.
#include "rollout/token_sampler.hpp"

#include <torch/types.h>

#include <limits>

namespace astraflow::engine_detail {

namespace {

// Inverse-CDF draws: for each row the first index whose cumulative mass passes u · total.
// Cumulated in float64, so the largest vocabularies keep their tail; a token of probability 0
// is never picked (the cumulative sum does not pass anything there).
torch::Tensor inverseCdf(const torch::Tensor& probs, const torch::Tensor& uniforms) {
  const auto cum = probs.to(torch::kFloat64).cumsum(-1);
  const auto target = (uniforms * cum.select(-1, -1)).unsqueeze(-1);
  return at::searchsorted(cum, target, /*out_int32=*/false, /*right=*/true).squeeze(-1).clamp_max(probs.size(-1) - 1);
}

}  // namespace

std::vector<SampledToken> sampleRowsWithTensors(const torch::Tensor& logits, const std::vector<RowSampling>& rows) {
  const auto B = static_cast<std::int64_t>(rows.size());
  std::vector<SampledToken> out(rows.size());
  if (B == 0) return out;
  const auto device = logits.device();
  std::vector<double> temps(rows.size()), uniforms(rows.size());
  std::vector<std::int64_t> greedy, plain, nucleus;
  std::vector<double> top_p;
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& r = rows[static_cast<std::size_t>(b)];
    temps[static_cast<std::size_t>(b)] = r.greedy ? 1.0 : r.temperature;
    uniforms[static_cast<std::size_t>(b)] = r.uniform;
    if (r.greedy) {
      greedy.push_back(b);
    } else if (r.top_p < 1.0) {
      nucleus.push_back(b);
      top_p.push_back(r.top_p);
    } else {
      plain.push_back(b);
    }
  }
  auto scaled = logits / torch::tensor(temps, torch::kFloat64).to(device, torch::kFloat32).unsqueeze(1);
  for (std::int64_t b = 0; b < B; ++b) {
    const auto* masked = rows[static_cast<std::size_t>(b)].masked;
    if (masked == nullptr || masked->empty()) continue;
    const auto ids = torch::tensor(std::vector<std::int64_t>(masked->begin(), masked->end()), torch::kLong).to(device);
    scaled.select(0, b).index_fill_(0, ids, -std::numeric_limits<float>::infinity());
  }
  // −inf is legitimate (tokens never emitted); NaN or +inf is not. Such rows draw from a
  // harmless distribution and are flagged.
  // A row whose every token is masked has no distribution either.
  const auto finite = (~(torch::isnan(scaled) | torch::isposinf(scaled))).all(-1) &
                      (scaled.amax(-1) > -std::numeric_limits<float>::infinity());
  const auto logp = torch::log_softmax(torch::where(finite.unsqueeze(-1), scaled, torch::zeros_like(scaled)), -1);
  auto next = torch::zeros({B}, torch::TensorOptions().dtype(torch::kLong).device(device));
  const auto u_all = torch::tensor(uniforms, torch::kFloat64).to(device);
  auto pick = [&](const std::vector<std::int64_t>& idx) { return torch::tensor(idx, torch::kLong).to(device); };
  if (!greedy.empty()) {
    const auto i = pick(greedy);
    next.index_copy_(0, i, logp.index_select(0, i).argmax(-1));
  }
  if (!plain.empty()) {
    const auto i = pick(plain);
    next.index_copy_(0, i, inverseCdf(logp.index_select(0, i).exp(), u_all.index_select(0, i)));
  }
  if (!nucleus.empty()) {
    // Keep the smallest prefix of tokens (by probability) whose mass reaches top_p; the token
    // that crosses top_p is kept.
    const auto i = pick(nucleus);
    auto [sorted, order] = logp.index_select(0, i).exp().sort(-1, /*descending=*/true);
    const auto p = torch::tensor(top_p, torch::kFloat64).to(device, torch::kFloat32).unsqueeze(1);
    const auto keep = (sorted.cumsum(-1) - sorted) < p;
    const auto choice = inverseCdf(torch::where(keep, sorted, torch::zeros_like(sorted)), u_all.index_select(0, i));
    next.index_copy_(0, i, order.gather(-1, choice.unsqueeze(-1)).squeeze(-1));
  }
  const auto lp = logp.gather(-1, next.unsqueeze(-1)).squeeze(-1).to(torch::kCPU);
  const auto tokens = next.to(torch::kCPU), ok = finite.to(torch::kCPU);
  const auto t_a = tokens.accessor<std::int64_t, 1>();
  const auto l_a = lp.accessor<float, 1>();
  const auto f_a = ok.accessor<bool, 1>();
  for (std::int64_t b = 0; b < B; ++b) {
    out[static_cast<std::size_t>(b)] = {static_cast<std::int32_t>(t_a[b]), l_a[b], f_a[b]};
  }
  return out;
}

std::vector<SampledToken> sampleRows(const torch::Tensor& logits, const std::vector<RowSampling>& rows) {
  if (!cpuSamplingApplies(logits)) return sampleRowsWithTensors(logits, rows);
  // Nucleus rows sort their distribution: the tensor path takes them, the others go row by row.
  std::vector<std::int64_t> nucleus, plain;
  for (std::size_t b = 0; b < rows.size(); ++b) {
    (!rows[b].greedy && rows[b].top_p < 1.0 ? nucleus : plain).push_back(static_cast<std::int64_t>(b));
  }
  if (nucleus.empty()) return sampleRowsOnCpu(logits, rows);
  if (plain.empty()) return sampleRowsWithTensors(logits, rows);
  auto part = [&](const std::vector<std::int64_t>& idx, auto&& sampler) {
    std::vector<RowSampling> sub;
    for (auto b : idx) sub.push_back(rows[static_cast<std::size_t>(b)]);
    return sampler(logits.index_select(0, torch::tensor(idx, torch::kLong)), sub);
  };
  const auto a = part(nucleus, sampleRowsWithTensors), c = part(plain, sampleRowsOnCpu);
  std::vector<SampledToken> out(rows.size());
  for (std::size_t i = 0; i < nucleus.size(); ++i) out[static_cast<std::size_t>(nucleus[i])] = a[i];
  for (std::size_t i = 0; i < plain.size(); ++i) out[static_cast<std::size_t>(plain[i])] = c[i];
  return out;
}

}  // namespace astraflow::engine_detail
