#pragma once
// Safetensors files (the Hugging Face weight format) and sharded checkpoints of them
// (model.safetensors.index.json), read memory-mapped and written atomically (docs/models.md).
//
// The format: 8 bytes little-endian N, N bytes of a JSON object (possibly padded with spaces)
// mapping each tensor name to {dtype, shape, data_offsets: [begin, end]} relative to the byte
// buffer after the header, plus an optional "__metadata__" of string → string; the buffer is
// the little-endian row-major data of every tensor, entirely covered without holes or overlaps.
// A file breaking any rule is refused whole, with a message naming the file and the tensor: a
// reader never sees half of a file. No LibTorch here: the model module turns views into tensors.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "astraflow/core/error.hpp"

namespace astraflow::io {

// The dtypes of the format ("F32", "BF16", …).
enum class StDtype { F64, F32, F16, BF16, I64, I32, I16, I8, U8, Bool };
std::size_t dtypeBytes(StDtype dtype);
const char* dtypeName(StDtype dtype);

// One tensor: its bytes are `bytes` (row-major, little-endian).
struct StTensorView {
  std::string name;
  StDtype dtype = StDtype::F32;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes;

  std::int64_t numel() const;
};

using StMetadata = std::map<std::string, std::string>;

// A private memory map of a whole file; unmapped by its destructor. Readers see it read-only;
// it is mapped writable copy-on-write so that a model adopting tensors over it
// (loadHfWeights, HfLoad::Map) may update them in place: a written page becomes the process's
// own, the file never changes.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// One .safetensors file, validated when opened; the views point into its map.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);
  // Validates `bytes` (named `label` in messages); the views point into `bytes`.
  static SafetensorsFile parse(std::span<const std::byte> bytes, const std::string& label);

  const std::vector<StTensorView>& tensors() const { return tensors_; }  // in data order
  const StTensorView* find(const std::string& name) const;
  const StMetadata& metadata() const { return metadata_; }
  // Unmaps the whole pages inside a tensor of this file from the process (madvise
  // MADV_DONTNEED; the pages stay in the page cache and a later read maps them again), so a
  // loader copying tensor by tensor keeps about one tensor of the file resident, not all of it.
  // Does nothing for parse()d bytes or a view of another file.
  void releasePages(const StTensorView& tensor) const;

 private:
  std::shared_ptr<MappedFile> map_;  // empty for parse()
  std::vector<StTensorView> tensors_;
  StMetadata metadata_;
};

// A tensor to write whose bytes are made when the writer reaches it: `fill` gets a buffer of
// exactly the bytes its dtype and shape need (reused from tensor to tensor). A writer of sources
// holds one tensor's bytes at a time, whatever the model's size: the exporters convert each
// parameter into it (no converted copy of the whole model).
struct StTensorSource {
  std::string name;
  StDtype dtype = StDtype::F32;
  std::vector<std::int64_t> shape;
  std::function<void(std::span<std::byte>)> fill;
};

// Writes `tensors` to `path` (through `path`.tmp and a rename: a reader never sees a partial
// file), in the order given, the data 8-byte aligned. Names must be unique and non-empty and
// each view's bytes must match its dtype and shape, else Error naming the tensor.
void writeSafetensors(const std::filesystem::path& path, const std::vector<StTensorSource>& tensors,
                      const StMetadata& metadata = {});
void writeSafetensors(const std::filesystem::path& path, const std::vector<StTensorView>& tensors,
                      const StMetadata& metadata = {});

// A checkpoint folder (or one file): model.safetensors, or shards listed by
// model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor: shard file}}). Every
// shard named is opened and validated; each tensor must be in the shard the index names, no
// tensor in two shards, no shard tensor missing from the index.
class SafetensorsCheckpoint {
 public:
  static SafetensorsCheckpoint open(const std::filesystem::path& folder_or_file);

  const std::vector<const StTensorView*>& tensors() const { return tensors_; }  // shard by shard
  const StTensorView* find(const std::string& name) const;
  std::size_t shards() const { return files_.size(); }
  // SafetensorsFile::releasePages for whichever shard holds `tensor`.
  void releasePages(const StTensorView& tensor) const;

 private:
  std::vector<SafetensorsFile> files_;
  std::vector<const StTensorView*> tensors_;
  std::map<std::string, const StTensorView*> by_name_;
};

// Writes `tensors` into `folder` as model.safetensors when they fit in `max_shard_bytes`, else
// as model-0000k-of-0000n.safetensors shards (in order, each at most max_shard_bytes unless one
// tensor alone is larger) plus model.safetensors.index.json with metadata.total_size, as
// transformers' save_pretrained does. Returns the files written.
std::vector<std::filesystem::path> writeSafetensorsCheckpoint(const std::filesystem::path& folder,
                                                              const std::vector<StTensorView>& tensors,
                                                              std::uint64_t max_shard_bytes,
                                                              const StMetadata& metadata = {});
std::vector<std::filesystem::path> writeSafetensorsCheckpoint(const std::filesystem::path& folder,
                                                              const std::vector<StTensorSource>& tensors,
                                                              std::uint64_t max_shard_bytes,
                                                              const StMetadata& metadata = {});

}  // namespace astraflow::io
