// packWeights / unpackWeights / viewWeights: a model's parameters as one bf16 "AWGT" blob, the unit the weight store
// moves, read back through ByteReader and checked name by name and shape by shape against the model.
#include "astraflow/model/weight_blob.hpp"

#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <string>

#include "astraflow/core/byte_io.hpp"
#include "astraflow/core/error.hpp"
#include "astraflow/model/policy_model.hpp"

namespace astraflow {

namespace {

constexpr std::uint32_t kMagic = 0x54474741;  // "AWGT" read as little-endian u32
constexpr std::uint32_t kFormatVersion = 1;

std::size_t pad8(std::size_t n) { return (n + 7) & ~std::size_t{7}; }

std::size_t descriptorBytes(const std::string& name, torch::IntArrayRef shape) {
  return pad8(4 + name.size() + 4 + 8 * shape.size());
}

std::size_t dataBytes(torch::IntArrayRef shape) {
  return pad8(2 * static_cast<std::size_t>(c10::multiply_integers(shape)));
}

// An untrusted blob, read through core's ByteReader; a problem throws Error naming the field.
class Cursor {
 public:
  explicit Cursor(std::span<const std::byte> b) : in_(b, "weights blob") {}
  template <ByteScalar T>
  T get(const char* field) {
    T v{};
    check(in_.get(v, field));
    return v;
  }
  const std::byte* need(std::size_t n, const char* field) {
    std::span<const std::byte> bytes;
    check(in_.getBytes(bytes, n, field));
    return bytes.data();
  }
  void alignTo8() { check(in_.skip(pad8(in_.offset()) - in_.offset(), "padding")); }
  std::size_t at() const { return in_.offset(); }

 private:
  void check(bool ok) const {
    if (!ok) throw Error(in_.error());
  }
  ByteReader in_;
};

}  // namespace

std::size_t packedWeightBytes(const PolicyModelImpl& model) {
  std::size_t n = 16;
  const auto params = model.orderedParameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    n += descriptorBytes(params[i].name, model.parameterShape(i)) + dataBytes(model.parameterShape(i));
  }
  return n;
}

void packWeights(const PolicyModelImpl& model, std::vector<std::byte>& out) {
  const auto params = model.orderedParameters();
  packWeights(model, out, [&](std::size_t i) { return params[i].tensor; });
}

void packWeights(const PolicyModelImpl& model, std::vector<std::byte>& out,
                 const std::function<torch::Tensor(std::size_t)>& value) {
  torch::NoGradGuard no_grad;
  const auto params = model.orderedParameters();
  out.assign(packedWeightBytes(model), std::byte{0});
  std::byte* p = out.data();
  auto put = [&](const void* src, std::size_t n) {
    std::memcpy(p, src, n);
    p += n;
  };
  const std::uint32_t header[4] = {kMagic, kFormatVersion, static_cast<std::uint32_t>(params.size()), 0};
  put(header, sizeof header);
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::byte* start = p;
    const auto& name = params[i].name;
    const auto shape = model.parameterShape(i);
    const auto name_len = static_cast<std::uint32_t>(name.size());
    put(&name_len, 4);
    put(name.data(), name.size());
    const auto ndims = static_cast<std::uint32_t>(shape.size());
    put(&ndims, 4);
    for (auto d : shape) {
      const std::int64_t dim = d;
      put(&dim, 8);
    }
    p = start + descriptorBytes(name, shape);
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto shape = model.parameterShape(i);
    // The conversion writes straight into the blob: the only copy on the trainer's side.
    torch::from_blob(p, shape, torch::kBFloat16).copy_(value(i).detach().view(shape));
    p += dataBytes(shape);
  }
}

namespace {

// The blob's tensors as bf16 views into it, checked against the model's parameter count and the
// blob's own structure (names and shapes are matched by the model's import).
std::vector<NamedTensor> blobTensors(std::span<const std::byte> blob, const PolicyModelImpl& model) {
  Cursor c(blob);
  if (c.get<std::uint32_t>("magic") != kMagic) throw Error("weights blob: bad magic (not an astraflow weight version)");
  const auto version = c.get<std::uint32_t>("format version");
  if (version != kFormatVersion) {
    throw Error(fmt::format("weights blob: format version {}, this build reads {}", version, kFormatVersion));
  }
  const auto count = c.get<std::uint32_t>("tensor count");
  c.get<std::uint32_t>("reserved");
  if (count != model.orderedParameters().size()) {
    throw Error(fmt::format("weights blob: {} tensors, the model (from the config) has {}", count,
                            model.orderedParameters().size()));
  }
  struct Descriptor {
    std::string name;
    std::vector<std::int64_t> dims;
  };
  std::vector<Descriptor> descriptors(count);
  for (auto& d : descriptors) {
    const auto name_len = c.get<std::uint32_t>("name length");
    const std::byte* name = c.need(name_len, "name");
    d.name.assign(reinterpret_cast<const char*>(name), name_len);
    const auto ndims = c.get<std::uint32_t>("ndims");
    if (ndims > 8) throw Error(fmt::format("weights blob: tensor '{}' claims {} dimensions", d.name, ndims));
    for (std::uint32_t i = 0; i < ndims; ++i) {
      const auto dim = c.get<std::int64_t>("dim");
      if (dim < 0 || dim > (std::int64_t{1} << 40)) {
        throw Error(fmt::format("weights blob: tensor '{}' has dimension {}", d.name, dim));
      }
      d.dims.push_back(dim);
    }
    c.alignTo8();
  }
  std::vector<NamedTensor> tensors;
  tensors.reserve(count);
  for (const auto& d : descriptors) {
    std::int64_t numel = 1;
    for (auto dim : d.dims) {
      if (dim != 0 && numel > static_cast<std::int64_t>(blob.size()) / dim) {
        throw Error(fmt::format("weights blob: tensor '{}' is larger than the blob", d.name));
      }
      numel *= dim;
    }
    const std::byte* data = c.need(pad8(2 * static_cast<std::size_t>(numel)), d.name.c_str());
    // A view, not a copy: importTensors converts into the parameters, adoptTensors points them here.
    tensors.push_back({d.name, torch::from_blob(const_cast<std::byte*>(data), d.dims, torch::kBFloat16)});
  }
  if (c.at() != blob.size()) {
    throw Error(fmt::format("weights blob: {} trailing bytes after the last tensor", blob.size() - c.at()));
  }
  return tensors;
}

}  // namespace

void unpackWeights(std::span<const std::byte> blob, PolicyModelImpl& model) {
  model.importTensors(blobTensors(blob, model));
}

bool canViewWeights(const PolicyModelImpl& model) {
  for (const auto& p : model.orderedParameters()) {
    if (!p.tensor.defined() || !p.tensor.device().is_cpu() || p.tensor.scalar_type() != torch::kBFloat16) return false;
  }
  return true;
}

void viewWeights(std::span<const std::byte> blob, PolicyModelImpl& model) {
  model.adoptTensors(blobTensors(blob, model));
}

}  // namespace astraflow
