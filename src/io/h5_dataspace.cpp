// H5Dataspace: shapes and selections.
#include <fmt/format.h>

#include "io/h5_check.hpp"

namespace astraflow::io {
namespace {

std::vector<hsize_t> toHsize(std::span<const std::uint64_t> values) {
  std::vector<hsize_t> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    out[i] = values[i] == H5Dataspace::kUnlimited ? H5S_UNLIMITED : values[i];
  }
  return out;
}

}  // namespace

H5Dataspace H5Dataspace::adopt(std::int64_t id) {
  H5Dataspace space;
  space.id_ = detail::H5Id(id, detail::H5Kind::Dataspace);
  return space;
}

H5Dataspace H5Dataspace::scalar() { return adopt(ASTRA_H5_CHECK(H5Screate(H5S_SCALAR))); }

H5Dataspace H5Dataspace::simple(std::span<const std::uint64_t> dims, std::span<const std::uint64_t> maxdims) {
  if (!maxdims.empty() && maxdims.size() != dims.size()) {
    ASTRA_H5_FAIL(fmt::format("dataspace with {} dims but {} maxdims", dims.size(), maxdims.size()));
  }
  const auto hdims = toHsize(dims);
  const auto hmax = toHsize(maxdims);
  return adopt(ASTRA_H5_CHECK(
      H5Screate_simple(static_cast<int>(hdims.size()), hdims.data(), hmax.empty() ? nullptr : hmax.data())));
}

int H5Dataspace::rank() const { return ASTRA_H5_CHECK(H5Sget_simple_extent_ndims(id())); }

std::vector<std::uint64_t> H5Dataspace::dims() const {
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank()));
  ASTRA_H5_CHECK(H5Sget_simple_extent_dims(id(), dims.data(), nullptr));
  return {dims.begin(), dims.end()};
}

std::vector<std::uint64_t> H5Dataspace::maxDims() const {
  std::vector<hsize_t> max(static_cast<std::size_t>(rank()));
  ASTRA_H5_CHECK(H5Sget_simple_extent_dims(id(), nullptr, max.data()));
  std::vector<std::uint64_t> out(max.size());
  for (std::size_t i = 0; i < max.size(); ++i) {
    out[i] = max[i] == H5S_UNLIMITED ? kUnlimited : max[i];
  }
  return out;
}

std::uint64_t H5Dataspace::elementCount() const {
  return static_cast<std::uint64_t>(ASTRA_H5_CHECK(H5Sget_simple_extent_npoints(id())));
}

void H5Dataspace::selectHyperslab(std::span<const std::uint64_t> start, std::span<const std::uint64_t> count) {
  const auto hstart = toHsize(start);
  const auto hcount = toHsize(count);
  ASTRA_H5_CHECK(H5Sselect_hyperslab(id(), H5S_SELECT_SET, hstart.data(), nullptr, hcount.data(), nullptr));
}

}  // namespace astraflow::io
