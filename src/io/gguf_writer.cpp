// GgufWriter::write: a GGUF v3 file (header, metadata key/values, tensor descriptions, then each tensor's bytes filled
// one at a time and 32-byte aligned), written to path.tmp and renamed.
#include "astraflow/io/gguf_writer.hpp"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <set>

#include "astraflow/core/error.hpp"

namespace astraflow::io {
namespace {

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr std::uint32_t kVersion = 3;
constexpr std::uint64_t kAlignment = 32;  // general.alignment's default

// GGUF metadata value types.
enum ValueType : std::uint32_t { U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9 };

template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // the machines astraflow runs on are little-endian, as GGUF is
  out.append(b, sizeof(T));
}
void putString(std::string& out, const std::string& s) {
  put<std::uint64_t>(out, s.size());
  out += s;
}
std::uint64_t padTo(std::uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

std::size_t ggufTypeBytes(GgufTensorType type) {
  switch (type) {
    case GgufTensorType::F32: return 4;
    case GgufTensorType::F16:
    case GgufTensorType::BF16: return 2;
  }
  return 0;
}

std::uint64_t GgufWriter::Tensor::bytes() const {
  std::uint64_t n = 1;
  for (std::int64_t d : shape) n *= static_cast<std::uint64_t>(d);
  return n * ggufTypeBytes(type);
}

void GgufWriter::setString(const std::string& key, std::string value) { metadata_.emplace_back(key, std::move(value)); }
void GgufWriter::setU32(const std::string& key, std::uint32_t value) { metadata_.emplace_back(key, value); }
void GgufWriter::setF32(const std::string& key, float value) { metadata_.emplace_back(key, value); }
void GgufWriter::setBool(const std::string& key, bool value) { metadata_.emplace_back(key, value); }
void GgufWriter::setStrings(const std::string& key, std::vector<std::string> values) {
  metadata_.emplace_back(key, std::move(values));
}
void GgufWriter::setI32s(const std::string& key, std::vector<std::int32_t> values) {
  metadata_.emplace_back(key, std::move(values));
}

void GgufWriter::addTensor(std::string name, std::vector<std::int64_t> shape, GgufTensorType type,
                           std::function<void(std::string&)> fill) {
  for (const Tensor& t : tensors_)
    if (t.name == name) throw Error(fmt::format("GGUF: tensor {} added twice", name));
  tensors_.push_back({std::move(name), std::move(shape), type, std::move(fill)});
}

void GgufWriter::write(const std::filesystem::path& path) const {
  std::string head;
  put(head, kMagic);
  put(head, kVersion);
  put<std::uint64_t>(head, tensors_.size());
  put<std::uint64_t>(head, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    putString(head, key);
    if (const auto* s = std::get_if<std::string>(&value)) {
      put<std::uint32_t>(head, STRING);
      putString(head, *s);
    } else if (const auto* u = std::get_if<std::uint32_t>(&value)) {
      put<std::uint32_t>(head, U32);
      put(head, *u);
    } else if (const auto* f = std::get_if<float>(&value)) {
      put<std::uint32_t>(head, F32);
      put(head, *f);
    } else if (const auto* b = std::get_if<bool>(&value)) {
      put<std::uint32_t>(head, BOOL);
      put<std::uint8_t>(head, *b ? 1 : 0);
    } else if (const auto* strings = std::get_if<std::vector<std::string>>(&value)) {
      put<std::uint32_t>(head, ARRAY);
      put<std::uint32_t>(head, STRING);
      put<std::uint64_t>(head, strings->size());
      for (const std::string& s : *strings) putString(head, s);
    } else {
      const auto& ints = std::get<std::vector<std::int32_t>>(value);
      put<std::uint32_t>(head, ARRAY);
      put<std::uint32_t>(head, I32);
      put<std::uint64_t>(head, ints.size());
      for (std::int32_t i : ints) put(head, i);
    }
  }
  std::uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    putString(head, t.name);
    put<std::uint32_t>(head, static_cast<std::uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) put<std::uint64_t>(head, static_cast<std::uint64_t>(*d));
    put<std::uint32_t>(head, static_cast<std::uint32_t>(t.type));
    put<std::uint64_t>(head, offset);
    offset = padTo(offset + t.bytes());
  }
  head.resize(padTo(head.size()), '\0');

  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(fmt::format("{}: cannot be written", tmp.string()));
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    std::string data;
    for (const Tensor& t : tensors_) {
      data.clear();
      t.fill(data);
      if (data.size() != t.bytes()) {
        out.close();
        std::filesystem::remove(tmp);
        throw Error(fmt::format("GGUF {}: tensor {} gave {} bytes, its shape and type need {}", path.string(), t.name,
                                data.size(), t.bytes()));
      }
      data.resize(padTo(data.size()), '\0');
      out.write(data.data(), static_cast<std::streamsize>(data.size()));
    }
    out.flush();
    if (!out) throw Error(fmt::format("{}: write failed (disk full?)", tmp.string()));
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace astraflow::io
