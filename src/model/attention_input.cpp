// The typed attention input (attention_input.hpp): spans from a packed layout, and attention
// computed per span without a mask.
#include "astraflow/model/attention_input.hpp"

#include <ATen/ops/scaled_dot_product_attention.h>

#include <algorithm>
#include <map>
#include <vector>

namespace astraflow {
namespace {

struct Run {
  std::int64_t start = 0, length = 0, sees = -1;
};

// Runs of equal, non-negative keys along one line; false when a key has two runs.
bool runsOf(const std::int64_t* key, const std::int64_t* sees, std::int64_t T, std::map<std::int64_t, Run>& runs) {
  for (std::int64_t t = 0; t < T;) {
    const auto k = key[t];
    std::int64_t end = t + 1;
    while (end < T && key[end] == k) ++end;
    if (k >= 0) {
      if (runs.count(k) != 0) return false;
      runs[k] = Run{t, end - t, sees ? sees[t] : -1};
    }
    t = end;
  }
  return true;
}

}  // namespace

bool rightPadded(const torch::Tensor& valid) {
  const auto T = valid.size(1);
  const auto lengths = valid.sum(1, /*keepdim=*/true);
  return torch::equal(valid, torch::arange(T, lengths.options()).unsqueeze(0) < lengths);
}

torch::Tensor attentionSpans(const torch::Tensor& valid, const torch::Tensor& id, const torch::Tensor& sees) {
  const auto B = valid.size(0), T = valid.size(1);
  const auto v = valid.to(torch::kCPU).contiguous();
  // Without segments each row's valid cells are its one sequence (key 0; padding -1).
  const auto keys = (id.defined() ? torch::where(v, id.to(torch::kCPU), -1) : v.to(torch::kLong) - 1).contiguous();
  const auto seen = sees.defined() ? sees.to(torch::kCPU).to(torch::kLong).contiguous() : torch::Tensor();
  std::vector<std::int64_t> rows;
  for (std::int64_t b = 0; b < B; ++b) {
    std::map<std::int64_t, Run> runs;
    const auto* key = keys.data_ptr<std::int64_t>() + b * T;
    const auto* see = seen.defined() ? seen.data_ptr<std::int64_t>() + b * T : nullptr;
    if (!runsOf(key, see, T, runs)) return {};
    // A segment is one run of valid cells (a valid cell inside a segment's run is the mask's
    // business, as is a segment id on a padding cell between its cells).
    for (const auto& [k, run] : runs) {
      std::int64_t seen_start = 0, seen_length = 0;
      if (const auto it = runs.find(run.sees); it != runs.end() && it->first != k) {
        // Cells before the span only: a seen segment laid out after it is partly hidden by causality.
        if (it->second.start + it->second.length > run.start) return {};
        seen_start = it->second.start, seen_length = it->second.length;
      }
      rows.insert(rows.end(), {b, run.start, run.length, seen_start, seen_length});
    }
  }
  const auto S = static_cast<std::int64_t>(rows.size() / 5);
  return torch::tensor(rows, torch::kLong).view({S, 5});
}

torch::Tensor spanAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& spans, double scale) {
  const auto B = q.size(0), H = q.size(1), T = q.size(2), hd = q.size(3);
  const bool gqa = k.size(1) != H;
  std::vector<std::vector<std::pair<std::int64_t, torch::Tensor>>> pieces(static_cast<std::size_t>(B));
  const auto s = spans.accessor<std::int64_t, 2>();
  for (std::int64_t i = 0; i < spans.size(0); ++i) {
    const auto line = s[i][0], start = s[i][1], length = s[i][2], seen_start = s[i][3], seen_length = s[i][4];
    const auto cut = [&](const torch::Tensor& x) {
      const auto own = x.select(0, line).narrow(1, start, length);
      return (seen_length > 0 ? torch::cat({x.select(0, line).narrow(1, seen_start, seen_length), own}, 1) : own)
          .unsqueeze(0);
    };
    // Causal over [seen ++ own]: the seen span's queries are computed again and dropped, so its
    // keys are visible to every own query and the own ones causally (the kernel's top-left diagonal).
    auto out = at::scaled_dot_product_attention(cut(q), cut(k), cut(v), {}, 0.0, /*is_causal=*/true, scale, gqa);
    pieces[static_cast<std::size_t>(line)].emplace_back(start, out.narrow(2, seen_length, length));
  }
  std::vector<torch::Tensor> lines;
  for (auto& line : pieces) {
    std::sort(line.begin(), line.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<torch::Tensor> parts;
    std::int64_t at = 0;
    const auto gap = [&](std::int64_t to) {
      if (to > at) parts.push_back(torch::zeros({1, H, to - at, hd}, q.options()));
    };
    for (auto& [start, out] : line) {
      gap(start);
      parts.push_back(std::move(out));
      at = start + parts.back().size(2);
    }
    gap(T);
    lines.push_back(parts.size() == 1 ? parts[0] : torch::cat(parts, 2));
  }
  return torch::cat(lines, 0);
}

}  // namespace astraflow
