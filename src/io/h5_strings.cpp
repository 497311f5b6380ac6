// Variable-length UTF-8 string datasets: short names (policies, ...), one per row. Stored as
// HDF5 variable-length strings, which h5dump prints as plain quoted text and h5py reads as str.
#include <fmt/format.h>

#include "io/h5_check.hpp"

namespace astraflow::io {
namespace {

// Checks that a dataset holds 1-D variable-length strings before touching its data.
void requireStrings(const H5Dataset& dataset) {
  const auto stored = dataset.type();
  const bool ok =
      ASTRA_H5_CHECK(H5Tget_class(stored.id())) == H5T_STRING && ASTRA_H5_CHECK(H5Tis_variable_str(stored.id())) > 0;
  const auto dims = dataset.shape();
  if (!ok || dims.size() != 1) {
    ASTRA_H5_FAIL(fmt::format("dataset '{}' in '{}' holds {} with rank {}, used as 1-D variable-length strings",
                              dataset.name(), dataset.fileName(), stored.describe(), dims.size()));
  }
}

// Frees the strings H5Dread allocated, also when copying them out throws.
class StringBuffer {
 public:
  StringBuffer(std::size_t count, const H5Datatype& mem_type, const H5Dataspace& space)
      : data_(count, nullptr), mem_type_(mem_type), space_(space) {}
  ~StringBuffer() {
    if (filled_ && !data_.empty()) H5Dvlen_reclaim(mem_type_.id(), space_.id(), H5P_DEFAULT, data_.data());
  }
  StringBuffer(const StringBuffer&) = delete;
  StringBuffer& operator=(const StringBuffer&) = delete;

  char** data() { return data_.data(); }
  void markFilled() { filled_ = true; }

 private:
  std::vector<char*> data_;
  const H5Datatype& mem_type_;
  const H5Dataspace& space_;
  bool filled_ = false;
};

}  // namespace

H5Dataset H5Location::createStrings(const std::string& path, std::uint64_t chunk_rows) const {
  // Like sequences, a variable-length string is a 16-byte heap reference in the chunk; names
  // are few, so small chunks keep a file of a handful of names small.
  return createExtendible(path, H5Datatype::variableString(), 0, chunk_rows == 0 ? 64 : chunk_rows);
}

void H5Dataset::appendStrings(const std::vector<std::string>& strings) const {
  requireStrings(*this);
  if (strings.empty()) return;
  std::vector<const char*> rows;
  rows.reserve(strings.size());
  for (const auto& s : strings) rows.push_back(s.c_str());  // read only during the write
  appendRaw(H5Datatype::variableString(), rows.data(), rows.size());
}

std::vector<std::string> H5Dataset::readStrings() const {
  requireStrings(*this);
  const auto file_space = space();
  const std::uint64_t count = file_space.elementCount();
  std::vector<std::string> out;
  if (count == 0) return out;
  const auto mem_type = H5Datatype::variableString();
  StringBuffer buffer(count, mem_type, file_space);
  ASTRA_H5_CHECK(H5Dread(id(), mem_type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()),
                 fmt::format("reading strings of '{}'", name()));
  buffer.markFilled();
  out.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    out.emplace_back(buffer.data()[i] != nullptr ? buffer.data()[i] : "");
  }
  return out;
}

}  // namespace astraflow::io
