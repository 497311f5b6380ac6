#pragma once
// The engine's KV memory (docs/rollout-backends.md, "The continuous engine"): fixed-size blocks
// of slots, one slot per token position, for every layer at once, handed out to sequences and
// counted by reference so that sequences with one prompt share its blocks. Block 0 is scratch:
// padding tokens write there and nobody reads it. Private to the rollout module.
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "astraflow/core/model_config.hpp"

namespace astraflow::engine_detail {

class KvBlockPool {
 public:
  // `blocks` usable blocks of `block_size` slots (the scratch block comes on top), in the
  // engine's dtype on its device. torch::empty: pages the system never touches stay uncommitted.
  KvBlockPool(const ModelConfig& model, const torch::TensorOptions& options, std::int64_t blocks, int block_size);

  // K and V of one block, every layer.
  static std::int64_t bytesPerBlock(const ModelConfig& model, torch::ScalarType dtype, int block_size);

  int blockSize() const { return block_size_; }
  std::int64_t totalBlocks() const { return static_cast<std::int64_t>(refs_.size()) - 1; }
  std::int64_t freeBlocks() const { return static_cast<std::int64_t>(free_.size()); }
  std::int64_t usedBlocks() const { return totalBlocks() - freeBlocks(); }
  std::int64_t peakUsedBlocks() const { return peak_used_; }
  std::int64_t bytesPerBlock() const { return block_bytes_; }

  // A block with one reference, or nothing when the pool is full.
  std::optional<std::int32_t> allocate();
  void retain(std::int32_t block);
  void release(std::int32_t block);  // back to the free list at zero references
  int refs(std::int32_t block) const { return refs_[static_cast<std::size_t>(block)]; }

  // The first `count` slots of `from` into `to`, every layer (copy-on-write of a shared block).
  void copySlots(std::int32_t from, std::int32_t to, int count);

  std::int64_t slot(std::int32_t block, std::int64_t offset) const { return block * block_size_ + offset; }
  static constexpr std::int64_t kScratchSlot = 0;

  std::vector<torch::Tensor>& keys() { return keys_; }
  std::vector<torch::Tensor>& values() { return values_; }

 private:
  int block_size_;
  std::int64_t block_bytes_;
  std::vector<torch::Tensor> keys_, values_;  // per layer [(blocks + 1) * block_size, kv_heads, head_dim]
  std::vector<int> refs_;                     // per block; refs_[0] is the scratch block's (never handed out)
  std::vector<std::int32_t> free_;            // a stack: the most recently freed block is reused first
  std::int64_t peak_used_ = 0;
};

}  // namespace astraflow::engine_detail
