// Micro-batch planning and the packed layout (docs/training.md).
#include "astraflow/trainer/micro_batches.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <span>

namespace astraflow {

namespace {

// A sequence of length 0 still takes a column: its row exists in the padded layout.
std::int64_t columns(std::int64_t length) { return std::max<std::int64_t>(1, length); }

// What the planner places: one row, or the rows of a group laid out after their shared prefix.
struct Unit {
  std::vector<std::int64_t> rows;
  std::int64_t prefix = 0;  // tokens laid out once for all rows (0: a single row)
  std::int64_t size = 0;    // columns it takes on its line
};

// What a line of `cells` costs, in tokens through the linear layers, where its attention is
// quadratic in its width (an explicit mask: every cell against every cell, masked or not).
double lineCost(std::int64_t cells, double pair_cost) {
  const auto w = static_cast<double>(cells);
  return w + pair_cost * w * w;
}

// The rows of a step as units. A group's rows join one tree while that costs less than laying
// the next row out alone (SharedPrefixes::pair_cost): a short prompt with long answers would
// otherwise make one line as wide as all the answers together.
std::vector<Unit> makeUnits(const std::vector<std::int64_t>& rows, const std::vector<std::int64_t>& lengths,
                            const SharedPrefixes* shared) {
  std::vector<Unit> units;
  std::map<std::int64_t, std::size_t> open_tree;  // group -> the tree among `units` rows join
  const auto length = [&](std::int64_t r) { return lengths[static_cast<std::size_t>(r)]; };
  for (const auto r : rows) {
    const std::int64_t prefix = shared ? shared->prefix[static_cast<std::size_t>(r)] : 0;
    if (prefix > 0) {
      const auto group = shared->group[static_cast<std::size_t>(r)];
      const auto it = open_tree.find(group);
      if (it != open_tree.end()) {
        Unit& tree = units[it->second];
        const auto own = length(r) - prefix;
        if (lineCost(tree.size + own, shared->pair_cost) <=
            lineCost(tree.size, shared->pair_cost) + lineCost(length(r), shared->pair_cost)) {
          tree.rows.push_back(r);
          tree.size += own;
          continue;
        }
      }
      open_tree[group] = units.size();
      units.push_back(Unit{{r}, prefix, length(r)});
      continue;
    }
    units.push_back(Unit{{r}, 0, columns(length(r))});
  }
  for (auto& u : units) {
    if (u.rows.size() == 1) u.prefix = 0, u.size = columns(length(u.rows.front()));  // nothing to share with
    u.size = columns(u.size);
  }
  return units;
}

// The micro-batch of `units` placed at (line, offset) each: its rows and their cells.
MicroBatch finish(const std::vector<const Unit*>& units, const std::vector<std::int64_t>& line,
                  const std::vector<std::int64_t>& offset, const std::vector<std::int64_t>& lengths, bool laid_out) {
  MicroBatch m;
  m.width = units.front()->size;  // longest first
  for (std::size_t u = 0; u < units.size(); ++u) {
    std::int64_t at = offset[u] + units[u]->prefix;
    for (const auto r : units[u]->rows) {
      m.rows.push_back(r);
      m.line.push_back(line[u]);
      m.offset.push_back(units[u]->prefix > 0 ? at : offset[u]);
      m.shared.push_back(units[u]->prefix);
      m.shared_offset.push_back(offset[u]);
      at += lengths[static_cast<std::size_t>(r)] - units[u]->prefix;
    }
    m.lines = std::max(m.lines, line[u] + 1);
  }
  if (!laid_out) m.line.clear(), m.offset.clear(), m.shared.clear(), m.shared_offset.clear();
  return m;
}

// Rows given as a token span each (any integer type), and their groups.
template <typename Token>
SharedPrefixes sharedPrefixesOf(const std::vector<std::span<const Token>>& rows,
                                const std::vector<std::int64_t>& groups, double pair_cost) {
  SharedPrefixes s;
  s.group = groups;
  s.pair_cost = pair_cost;
  s.prefix.assign(rows.size(), 0);
  std::map<std::int64_t, std::size_t> first;    // group -> its first row
  std::map<std::int64_t, std::int64_t> common;  // group -> tokens all its rows so far share
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto [it, fresh] = first.emplace(groups[r], r);
    const auto size = static_cast<std::int64_t>(rows[r].size());
    if (fresh) {
      common[groups[r]] = size;
      continue;
    }
    const auto& a = rows[it->second];
    auto& n = common[groups[r]];
    std::int64_t k = 0;
    const auto limit = std::min(n, size);
    while (k < limit && a[static_cast<std::size_t>(k)] == rows[r][static_cast<std::size_t>(k)]) ++k;
    n = k;
  }
  for (std::size_t r = 0; r < rows.size(); ++r) s.prefix[r] = common[groups[r]];
  return s;
}

}  // namespace

SharedPrefixes findSharedPrefixes(const torch::Tensor& tokens, const torch::Tensor& lengths,
                                  const torch::Tensor& group_ids, double pair_cost) {
  const auto tok = tokens.to(torch::kCPU).contiguous();
  const auto len = lengths.to(torch::kCPU).contiguous();
  const auto grp = group_ids.to(torch::kCPU).contiguous();
  const auto B = tok.size(0), T = tok.size(1);
  std::vector<std::span<const std::int64_t>> rows;
  for (std::int64_t r = 0; r < B; ++r) {
    rows.emplace_back(tok.data_ptr<std::int64_t>() + r * T,
                      static_cast<std::size_t>(std::min(T, len.data_ptr<std::int64_t>()[r])));
  }
  return sharedPrefixesOf(
      rows, std::vector<std::int64_t>(grp.data_ptr<std::int64_t>(), grp.data_ptr<std::int64_t>() + B), pair_cost);
}

double treePairCost(const ModelConfig& m) { return m.attention == AttentionKind::Eager ? attentionPairCost(m) : 0.0; }

double attentionPairCost(const ModelConfig& m) {
  const double d = m.d_model, qh = static_cast<double>(m.heads) * m.headDim(),
               kv = static_cast<double>(m.kv_heads) * m.headDim(), layers = m.layers;
  const double per_token = layers * 2.0 * (d * qh + 2.0 * d * kv + qh * d + 3.0 * d * m.ffn_hidden) +
                           2.0 * d * static_cast<double>(m.vocab_size);
  return layers * 4.0 * qh / per_token;
}

SharedPrefixes findSharedPrefixes(const std::vector<TrainingSample>& episodes, const std::vector<std::int64_t>& groups,
                                  double pair_cost) {
  std::vector<std::span<const std::int32_t>> rows;
  for (const auto& e : episodes) rows.emplace_back(e.tokens);
  return sharedPrefixesOf(rows, groups, pair_cost);
}

std::vector<MicroBatch> planMicroBatches(const std::vector<std::int64_t>& rows,
                                         const std::vector<std::int64_t>& lengths, std::int64_t budget, bool packed,
                                         const SharedPrefixes* shared) {
  std::vector<Unit> units = makeUnits(rows, lengths, shared);
  const bool trees = std::any_of(units.begin(), units.end(), [](const Unit& u) { return u.prefix > 0; });
  // Trees differ in size far more than rows do (a prompt plus G answers), so padding them to the
  // longest would waste what sharing saves: they always go first-fit into lines.
  const bool laid_out = packed || trees;
  // Longest first: each micro-batch's width is its first unit, and the padded layout wastes
  // least when its rows are alike.
  std::stable_sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) { return a.size > b.size; });
  // First fit is incremental: a unit added last goes where first fit over the whole list would
  // put it, so the current micro-batch's line fills are kept, not recomputed.
  std::vector<MicroBatch> out;
  std::vector<const Unit*> current;
  std::vector<std::int64_t> fill, line, offset;  // the lines' fills; each current unit's place
  std::int64_t width = 0;
  for (const auto& u : units) {
    std::size_t l = 0;
    if (laid_out) {
      while (l < fill.size() && fill[l] + u.size > width) ++l;
    } else {
      l = fill.size();  // a line each
    }
    const auto lines = static_cast<std::int64_t>(std::max(fill.size(), l + 1));
    if (!current.empty() && budget > 0 && lines * width > budget) {
      out.push_back(finish(current, line, offset, lengths, laid_out));
      current.clear(), fill.clear(), line.clear(), offset.clear();
      l = 0;
    }
    if (current.empty()) width = u.size;  // longest first: the first unit sets the width
    if (l == fill.size()) fill.push_back(0);
    line.push_back(static_cast<std::int64_t>(l));
    offset.push_back(fill[l]);
    fill[l] += u.size;
    current.push_back(&u);
  }
  if (!current.empty()) out.push_back(finish(current, line, offset, lengths, laid_out));
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

  // Laid out: line l holds its units back to back — a row alone, or a group's shared prefix
  // then each row's remaining tokens. Pad cells at a line's end are invalid and form a segment
  // of their own. Built on the host (small: lines × W) and moved once.
  const auto host_lengths = seq_lengths.to(torch::kCPU);
  const auto* len = host_lengths.data_ptr<std::int64_t>();
  const auto L = micro.lines;
  auto flat_index = torch::full({L * W}, n * width, torch::kLong);  // source cell in seq_tokens (n*width: pad)
  auto positions = torch::zeros({L, W}, torch::kLong);
  auto valid = torch::zeros({L, W}, torch::kBool);
  auto segments = torch::full({L, W}, -1, torch::kLong);  // row i: segment i; a shared prefix: n + its first row
  auto sees = torch::full({L, W}, -2, torch::kLong);      // a row's own cells see its prefix's segment
  // Each scored token: its cell and the cell before it in its sequence, whose hidden state scores
  // it. A shared prefix's tokens are scored once; every row of the tree reads them.
  std::vector<std::int64_t> scored_cells, hidden_cells, result_cells, result_scores;
  std::vector<std::int64_t> score_of(static_cast<std::size_t>(L * W), -1);
  auto fi = flat_index.accessor<std::int64_t, 1>();
  auto pos = positions.accessor<std::int64_t, 2>();
  auto val = valid.accessor<bool, 2>();
  auto seg = segments.accessor<std::int64_t, 2>();
  auto see = sees.accessor<std::int64_t, 2>();
  std::vector<std::int64_t> prefix_segment(static_cast<std::size_t>(L * W), -1);  // by the prefix's first cell
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    const auto line = micro.line[k];
    const auto P = micro.shared.empty() ? 0 : micro.shared[k];
    const auto p0 = micro.shared.empty() ? 0 : micro.shared_offset[k];
    auto& prefix_seg = prefix_segment[static_cast<std::size_t>(line * W + p0)];
    if (P > 0 && prefix_seg < 0) prefix_seg = n + i;
    const auto cell = [&](std::int64_t t) { return t < P ? p0 + t : micro.offset[k] + t - P; };
    for (std::int64_t t = 0; t < len[i]; ++t) {
      const auto c = cell(t);
      fi[line * W + c] = i * width + t;
      pos[line][c] = t;
      val[line][c] = true;
      seg[line][c] = t < P ? prefix_seg : i;
      if (t >= P && P > 0) see[line][c] = prefix_seg;
      if (t == 0) continue;
      auto& score = score_of[static_cast<std::size_t>(line * W + c)];
      if (score < 0) {
        score = static_cast<std::int64_t>(scored_cells.size());
        scored_cells.push_back(line * W + c);
        hidden_cells.push_back(line * W + cell(t - 1));
      }
      result_cells.push_back(i * width + t);
      result_scores.push_back(score);
    }
  }
  // Pad cells take token 0 (never attended to, never scored).
  const auto source = torch::cat({seq_tokens.reshape({-1}), torch::zeros({1}, seq_tokens.options())});
  const auto line_tokens = source.index_select(0, flat_index.to(device));  // [L*W]
  const Segments layout(segments.to(device), micro.shared.empty() ? torch::Tensor() : sees.to(device));
  const auto [hidden, head] =
      model.hiddenStatesAndHead(line_tokens.view({L, W}), positions.to(device), valid.to(device), layout, temperature);
  const auto cells = torch::tensor(scored_cells, torch::kLong).to(device);
  const auto logp = chunkedTokenLogProbs(
      hidden.reshape({L * W, -1}).index_select(0, torch::tensor(hidden_cells, torch::kLong).to(device)),
      line_tokens.index_select(0, cells), head, model.logitsChunkRows(cells.size(0)));
  const auto per_row = logp.index_select(0, torch::tensor(result_scores, torch::kLong).to(device));
  return torch::zeros({n * width}, logp.options())
      .index_copy(0, torch::tensor(result_cells, torch::kLong).to(device), per_row)
      .view({n, width});
}

}  // namespace astraflow
