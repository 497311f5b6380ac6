// Micro-batch planning and the packed layout (docs/training.md).
#include "astraflow/trainer/micro_batches.hpp"

#include <algorithm>
#include <numeric>
#include <random>

namespace astraflow {

namespace {

// First fit of `lengths` (longest first) into lines `width` wide: the line and offset of each
// (appended to `line` / `offset`); returns the number of lines.
std::int64_t firstFit(const std::vector<std::int64_t>& lengths, std::int64_t width, std::vector<std::int64_t>& line,
                      std::vector<std::int64_t>& offset) {
  std::vector<std::int64_t> fill;
  for (const auto len : lengths) {
    std::size_t l = 0;
    while (l < fill.size() && fill[l] + len > width) ++l;
    if (l == fill.size()) fill.push_back(0);
    line.push_back(static_cast<std::int64_t>(l));
    offset.push_back(fill[l]);
    fill[l] += len;
  }
  return static_cast<std::int64_t>(fill.size());
}

// A sequence of length 0 still takes a column: its row exists in the padded layout.
std::int64_t columns(std::int64_t length) { return std::max<std::int64_t>(1, length); }

MicroBatch finish(std::vector<std::int64_t> rows, const std::vector<std::int64_t>& lengths, bool packed) {
  MicroBatch m;
  m.rows = std::move(rows);
  m.width = columns(lengths[static_cast<std::size_t>(m.rows.front())]);
  if (!packed) {
    m.lines = static_cast<std::int64_t>(m.rows.size());
    return m;
  }
  std::vector<std::int64_t> lens;
  for (const auto r : m.rows) lens.push_back(columns(lengths[static_cast<std::size_t>(r)]));
  m.lines = firstFit(lens, m.width, m.line, m.offset);
  return m;
}

}  // namespace

std::vector<MicroBatch> planMicroBatches(const std::vector<std::int64_t>& rows,
                                         const std::vector<std::int64_t>& lengths, std::int64_t budget, bool packed) {
  std::vector<std::int64_t> order = rows;
  // Longest first: each micro-batch's width is its first sequence, and the padded layout wastes
  // least when its rows are alike.
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return lengths[static_cast<std::size_t>(a)] > lengths[static_cast<std::size_t>(b)];
  });
  // First fit is incremental: a sequence added last goes where first fit over the whole list
  // would put it, so the current micro-batch's line fills are kept, not recomputed.
  std::vector<MicroBatch> out;
  std::vector<std::int64_t> current, fill;  // rows of the micro-batch being filled; its lines' fills
  std::int64_t width = 0;
  for (const auto r : order) {
    const auto len = columns(lengths[static_cast<std::size_t>(r)]);
    std::size_t line = 0;
    if (packed) {
      while (line < fill.size() && fill[line] + len > width) ++line;
    } else {
      line = fill.size();  // padded: a line each
    }
    const auto lines = static_cast<std::int64_t>(std::max(fill.size(), line + 1));
    if (!current.empty() && budget > 0 && lines * width > budget) {
      out.push_back(finish(std::move(current), lengths, packed));
      current.clear();
      fill.clear();
      line = 0;
    }
    if (current.empty()) width = len;  // longest first: the first row sets the width
    if (line == fill.size()) fill.push_back(0);
    fill[line] += len;
    current.push_back(r);
  }
  if (!current.empty()) out.push_back(finish(std::move(current), lengths, packed));
  return out;
}

std::vector<std::int64_t> miniBatchOrder(std::int64_t rows, std::int64_t step) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(rows));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::mt19937_64 rng(static_cast<std::uint64_t>(step) * 0x9E3779B97F4A7C15ULL + 1);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

torch::Tensor rowIndex(const std::vector<std::int64_t>& rows, const torch::Device& device) {
  return torch::tensor(rows, torch::kLong).to(device);
}

torch::Tensor microBatchLogProbs(PolicyModelImpl& model, const MicroBatch& micro, const torch::Tensor& tokens,
                                 const torch::Tensor& lengths, double temperature) {
  const auto device = tokens.device();
  const auto idx = rowIndex(micro.rows, device);
  const auto W = micro.width;
  const auto n = static_cast<std::int64_t>(micro.rows.size());
  const auto width = std::min<std::int64_t>(W, tokens.size(1));
  const auto seq_tokens = tokens.index_select(0, idx).narrow(1, 0, width);
  const auto seq_lengths = lengths.index_select(0, idx);
  if (micro.line.empty()) return sequenceLogProbs(model, seq_tokens.contiguous(), seq_lengths, temperature);

  // Packed: line l holds its sequences back to back; pad cells at a line's end are invalid and
  // form a segment of their own. Built on the host (small: lines × W) and moved once.
  const auto host_lengths = seq_lengths.to(torch::kCPU);
  const auto* len = host_lengths.data_ptr<std::int64_t>();
  const auto L = micro.lines;
  auto flat_index = torch::full({L * W}, n * width, torch::kLong);  // source cell in seq_tokens (n*width: pad)
  auto positions = torch::zeros({L, W}, torch::kLong);
  auto valid = torch::zeros({L, W}, torch::kBool);
  auto segments = torch::full({L, W}, -1, torch::kLong);
  // Each scored token: its packed cell (scored from the hidden state of the cell before it) and
  // its place in the [n, width] result.
  std::vector<std::int64_t> scored_cells, result_cells;
  auto fi = flat_index.accessor<std::int64_t, 1>();
  auto pos = positions.accessor<std::int64_t, 2>();
  auto val = valid.accessor<bool, 2>();
  auto seg = segments.accessor<std::int64_t, 2>();
  for (std::int64_t i = 0; i < n; ++i) {
    const auto line = micro.line[static_cast<std::size_t>(i)], off = micro.offset[static_cast<std::size_t>(i)];
    for (std::int64_t t = 0; t < len[i]; ++t) {
      fi[line * W + off + t] = i * width + t;
      pos[line][off + t] = t;
      val[line][off + t] = true;
      seg[line][off + t] = i;
      if (t > 0) {
        scored_cells.push_back(line * W + off + t);
        result_cells.push_back(i * width + t);
      }
    }
  }
  // Pad cells take token 0 (never attended to, never scored).
  const auto source = torch::cat({seq_tokens.reshape({-1}), torch::zeros({1}, seq_tokens.options())});
  const auto line_tokens = source.index_select(0, flat_index.to(device));  // [L*W]
  const auto [hidden, head] = model.hiddenStatesAndHead(line_tokens.view({L, W}), positions.to(device),
                                                        valid.to(device), segments.to(device), temperature);
  const auto cells = torch::tensor(scored_cells, torch::kLong).to(device);
  const auto logp =
      chunkedTokenLogProbs(hidden.reshape({L * W, -1}).index_select(0, cells - 1), line_tokens.index_select(0, cells),
                           head, model.logitsChunkRows(cells.size(0)));
  return torch::zeros({n * width}, logp.options())
      .index_copy(0, torch::tensor(result_cells, torch::kLong).to(device), logp)
      .view({n, width});
}

}  // namespace astraflow
