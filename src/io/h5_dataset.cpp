// H5Dataset: shapes, validated whole reads and appends to extendible datasets.
#include <fmt/format.h>

#include "io/h5_check.hpp"

namespace astraflow::io {

H5Dataset H5Dataset::adopt(std::int64_t id) { return H5Dataset(id); }

H5Datatype H5Dataset::type() const { return H5Datatype::adopt(ASTRA_H5_CHECK(H5Dget_type(id()))); }

H5Dataspace H5Dataset::space() const { return H5Dataspace::adopt(ASTRA_H5_CHECK(H5Dget_space(id()))); }

std::vector<std::uint64_t> H5Dataset::shape() const { return space().dims(); }

std::uint64_t H5Dataset::rows() const {
  const auto dims = shape();
  return dims.empty() ? 1 : dims[0];
}

std::uint64_t H5Dataset::checkedElementCount(ElementType wanted, int rank) const {
  const auto stored = type();
  const auto dims = shape();
  if (!stored.holds(wanted) || static_cast<int>(dims.size()) != rank) {
    ASTRA_H5_FAIL(fmt::format("dataset '{}' in '{}' holds {} with rank {} (shape [{}]), read as {} with rank {}",
                              name(), fileName(), stored.describe(), dims.size(), fmt::join(dims, ", "),
                              elementTypeName(wanted), rank));
  }
  std::uint64_t count = 1;
  for (const auto d : dims) count *= d;
  return count;
}

void H5Dataset::readAll(ElementType type, void* out) const {
  if (space().elementCount() == 0) return;
  ASTRA_H5_CHECK(H5Dread(id(), detail::nativeTypeOf(type), H5S_ALL, H5S_ALL, H5P_DEFAULT, out),
                 fmt::format("reading dataset '{}'", name()));
}

void H5Dataset::readRaw(const H5Datatype& mem_type, void* out) const {
  if (space().elementCount() == 0) return;
  ASTRA_H5_CHECK(H5Dread(id(), mem_type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out),
                 fmt::format("reading dataset '{}'", name()));
}

void H5Dataset::appendRaw(const H5Datatype& mem_type, const void* data, std::uint64_t new_rows) const {
  if (new_rows == 0) return;
  auto file_space = space();
  auto dims = file_space.dims();
  if (dims.empty() || dims.size() > 2) {
    ASTRA_H5_FAIL(
        fmt::format("appending to dataset '{}' of rank {}: only 1-D and 2-D "
                    "extendible datasets grow by rows",
                    name(), dims.size()));
  }
  const std::uint64_t old_rows = dims[0];
  dims[0] = old_rows + new_rows;
  std::vector<hsize_t> new_dims(dims.begin(), dims.end());
  ASTRA_H5_CHECK(H5Dset_extent(id(), new_dims.data()),
                 fmt::format("growing dataset '{}' (created extendible?) to {} rows", name(), dims[0]));

  file_space = space();
  std::vector<std::uint64_t> start(dims.size(), 0);
  std::vector<std::uint64_t> count = dims;
  start[0] = old_rows;
  count[0] = new_rows;
  file_space.selectHyperslab(start, count);
  const auto mem_space = H5Dataspace::simple(count);
  ASTRA_H5_CHECK(H5Dwrite(id(), mem_type.id(), mem_space.id(), file_space.id(), H5P_DEFAULT, data),
                 fmt::format("appending {} rows to dataset '{}'", new_rows, name()));
}

void H5Dataset::appendElements(ElementType type, const void* data, std::size_t count) const {
  const auto stored = this->type();
  const auto dims = shape();
  if (!stored.holds(type)) {
    ASTRA_H5_FAIL(fmt::format("appending {} values to dataset '{}', which holds {}", elementTypeName(type), name(),
                              stored.describe()));
  }
  const std::uint64_t columns = dims.size() == 2 ? dims[1] : 1;
  if (columns == 0 || count % columns != 0) {
    ASTRA_H5_FAIL(
        fmt::format("appending {} values to dataset '{}' with {} columns: not a "
                    "whole number of rows",
                    count, name(), columns));
  }
  appendRaw(H5Datatype::of(type), data, count / columns);
}

}  // namespace astraflow::io
