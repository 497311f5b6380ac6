// KvBlockPool: the continuous engine's paged KV memory: per-layer slot tensors cut into blocks, reference-counted so
// that sequences share a prompt's blocks, with copySlots for copy-on-write and block 0 as scratch.
#include "rollout/kv_block_pool.hpp"

#include <fmt/format.h>

#include "astraflow/core/error.hpp"

namespace astraflow::engine_detail {

KvBlockPool::KvBlockPool(const ModelConfig& model, const torch::TensorOptions& options, std::int64_t blocks,
                         int block_size)
    : block_size_(block_size), block_bytes_(bytesPerBlock(model, options.dtype().toScalarType(), block_size)) {
  if (blocks < 1 || block_size < 1) {
    throw Error(
        fmt::format("engine: a KV pool needs a block or more of a slot or more (got {} of {})", blocks, block_size));
  }
  const std::int64_t slots = (blocks + 1) * block_size;
  for (int l = 0; l < model.layers; ++l) {
    keys_.push_back(torch::empty({slots, model.kv_heads, model.headDim()}, options));
    values_.push_back(torch::empty({slots, model.kv_heads, model.headDim()}, options));
  }
  refs_.assign(static_cast<std::size_t>(blocks + 1), 0);
  refs_[0] = 1;  // scratch
  free_.reserve(static_cast<std::size_t>(blocks));
  for (std::int64_t b = blocks; b >= 1; --b) free_.push_back(static_cast<std::int32_t>(b));
}

std::int64_t KvBlockPool::bytesPerBlock(const ModelConfig& model, torch::ScalarType dtype, int block_size) {
  return 2 * static_cast<std::int64_t>(model.layers) * model.kv_heads * model.headDim() * block_size *
         static_cast<std::int64_t>(c10::elementSize(dtype));
}

std::optional<std::int32_t> KvBlockPool::allocate() {
  if (free_.empty()) return std::nullopt;
  const std::int32_t b = free_.back();
  free_.pop_back();
  refs_[static_cast<std::size_t>(b)] = 1;
  peak_used_ = std::max(peak_used_, usedBlocks());
  return b;
}

void KvBlockPool::retain(std::int32_t block) { ++refs_[static_cast<std::size_t>(block)]; }

void KvBlockPool::release(std::int32_t block) {
  int& r = refs_[static_cast<std::size_t>(block)];
  if (r <= 0 || block == 0) throw Error(fmt::format("engine: KV block {} released more often than held", block));
  if (--r == 0) free_.push_back(block);
}

void KvBlockPool::copySlots(std::int32_t from, std::int32_t to, int count) {
  if (count <= 0) return;
  for (auto* pool : {&keys_, &values_}) {
    for (auto& layer : *pool) layer.narrow(0, slot(to, 0), count).copy_(layer.narrow(0, slot(from, 0), count));
  }
}

}  // namespace astraflow::engine_detail
