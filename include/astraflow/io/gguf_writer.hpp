#pragma once
// GGUF files (llama.cpp's model format, version 3): a header, typed metadata key/values, tensor
// descriptions and the tensor data, each tensor 32-byte aligned. Tensors are produced one at a
// time while the file is written, so writing a model holds one tensor's bytes, not the model's.
// Written through `path`.tmp and a rename: a reader never sees a partial file.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <variant>
#include <vector>

namespace astraflow::io {

// ggml's tensor types astraflow writes.
enum class GgufTensorType : std::uint32_t { F32 = 0, F16 = 1, BF16 = 30 };
std::size_t ggufTypeBytes(GgufTensorType type);

class GgufWriter {
 public:
  void setString(const std::string& key, std::string value);
  void setU32(const std::string& key, std::uint32_t value);
  void setF32(const std::string& key, float value);
  void setBool(const std::string& key, bool value);
  void setStrings(const std::string& key, std::vector<std::string> values);
  void setI32s(const std::string& key, std::vector<std::int32_t> values);

  // `shape` in row-major order (as safetensors and torch give it; GGUF stores it innermost
  // first). `fill` appends the tensor's bytes (little-endian, exactly numel × type size) to the
  // string it is given, when the file is written. Throws Error on a duplicate name.
  void addTensor(std::string name, std::vector<std::int64_t> shape, GgufTensorType type,
                 std::function<void(std::string&)> fill);

  // Throws Error naming the file or the tensor whose bytes had the wrong size.
  void write(const std::filesystem::path& path) const;

  std::size_t tensorCount() const { return tensors_.size(); }

 private:
  using MetaValue =
      std::variant<std::string, std::uint32_t, float, bool, std::vector<std::string>, std::vector<std::int32_t>>;
  struct Tensor {
    std::string name;
    std::vector<std::int64_t> shape;
    GgufTensorType type;
    std::function<void(std::string&)> fill;
    std::uint64_t bytes() const;
  };
  std::vector<std::pair<std::string, MetaValue>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace astraflow::io
