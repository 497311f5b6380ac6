#pragma once
// A full bf16 weight version as one byte string: what the weight store moves (docs/architecture.md §8).
//
// Layout (little-endian):
//   0   4  magic "AWGT"
//   4   4  format version 1
//   8   4  tensor count n
//   12  4  reserved 0
//   then per tensor: u32 name bytes, name, u32 ndims, i64 dims[ndims], padded with zeros to a
//   multiple of 8; then the bf16 data of every tensor in the same order, each padded to 8 bytes.
// The store checks its own checksum on every pull; this layer checks structure, names and shapes
// against the model built from the config, so a blob from another model is refused by name.
#include <torch/types.h>

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

namespace astraflow {

class PolicyModelImpl;

// Exact size of packWeights(model) for this model's parameters.
std::size_t packedWeightBytes(const PolicyModelImpl& model);

// Writes the model's parameters as bf16 into `out` (resized); one conversion copy per tensor.
void packWeights(const PolicyModelImpl& model, std::vector<std::byte>& out);
// The same with parameter i's full value from value(i), called once per parameter in order
// (a parameter-sharded trainer gathers each from the shards).
void packWeights(const PolicyModelImpl& model, std::vector<std::byte>& out,
                 const std::function<torch::Tensor(std::size_t)>& value);

// Loads a packed blob into the model (validated: structure, every name and shape, finite
// values; nothing changes unless all pass). Throws Error naming the problem.
void unpackWeights(std::span<const std::byte> blob, PolicyModelImpl& model);
// Points the model's parameters into the blob itself, no copy (validated as unpackWeights): an
// engine running bf16 on the CPU reads a node-shared version in place. Needs canViewWeights;
// the blob must stay unchanged and alive while the model uses it.
void viewWeights(std::span<const std::byte> blob, PolicyModelImpl& model);
// The model's parameters are bf16 on the CPU (and not sharded): the blob's bytes can be them.
bool canViewWeights(const PolicyModelImpl& model);

}  // namespace astraflow
