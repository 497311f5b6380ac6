// Variable-length int32 datasets: token sequences of differing lengths, one per row.
#include <fmt/format.h>

#include "io/h5_check.hpp"

namespace astraflow::io {
namespace {

H5Datatype sequenceMemType() { return H5Datatype::variableLengthOf(H5Datatype::of(ElementType::Int32)); }

// Checks that a dataset holds 1-D vlen<int32> before touching its data.
void requireSequences(const H5Dataset& dataset) {
  const auto stored = dataset.type();
  bool ok = ASTRA_H5_CHECK(H5Tget_class(stored.id())) == H5T_VLEN;
  if (ok) {
    const auto base = H5Datatype::adopt(ASTRA_H5_CHECK(H5Tget_super(stored.id())));
    ok = base.holds(ElementType::Int32);
  }
  const auto dims = dataset.shape();
  if (!ok || dims.size() != 1) {
    ASTRA_H5_FAIL(
        fmt::format("dataset '{}' in '{}' holds {} with rank {}, used as 1-D "
                    "vlen<int32> sequences",
                    dataset.name(), dataset.fileName(), stored.describe(), dims.size()));
  }
}

// Frees what H5Dread allocated for vlen data, also when copying out throws.
class VlenBuffer {
 public:
  VlenBuffer(std::size_t count, const H5Datatype& mem_type, const H5Dataspace& space)
      : data_(count), mem_type_(mem_type), space_(space) {}
  ~VlenBuffer() {
    if (filled_ && !data_.empty()) {
      H5Dvlen_reclaim(mem_type_.id(), space_.id(), H5P_DEFAULT, data_.data());
    }
  }
  VlenBuffer(const VlenBuffer&) = delete;
  VlenBuffer& operator=(const VlenBuffer&) = delete;

  hvl_t* data() { return data_.data(); }
  void markFilled() { filled_ = true; }

 private:
  std::vector<hvl_t> data_;
  const H5Datatype& mem_type_;
  const H5Dataspace& space_;
  bool filled_ = false;
};

}  // namespace

void H5Dataset::appendSequences(const Sequences& sequences) const {
  requireSequences(*this);
  if (sequences.empty()) return;
  std::vector<hvl_t> rows(sequences.size());
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    rows[i].len = sequences[i].size();
    // HDF5 only reads through this pointer during the write.
    rows[i].p = sequences[i].empty() ? nullptr : const_cast<std::int32_t*>(sequences[i].data());
  }
  appendRaw(sequenceMemType(), rows.data(), rows.size());
}

Sequences H5Dataset::readSequences() const {
  requireSequences(*this);
  const auto file_space = space();
  const std::uint64_t count = file_space.elementCount();
  Sequences out(count);
  if (count == 0) return out;
  const auto mem_type = sequenceMemType();
  VlenBuffer buffer(count, mem_type, file_space);
  ASTRA_H5_CHECK(H5Dread(id(), mem_type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()),
                 fmt::format("reading sequences of '{}'", name()));
  buffer.markFilled();
  for (std::uint64_t i = 0; i < count; ++i) {
    const auto* values = static_cast<const std::int32_t*>(buffer.data()[i].p);
    out[i].assign(values, values + buffer.data()[i].len);
  }
  return out;
}

}  // namespace astraflow::io
