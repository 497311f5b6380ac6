// H5PropertyList: the few creation properties astraflow sets.
#include "io/h5_check.hpp"

namespace astraflow::io {

H5PropertyList H5PropertyList::datasetCreate() {
  H5PropertyList list;
  list.id_ = detail::H5Id(ASTRA_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)), detail::H5Kind::PropertyList);
  return list;
}

H5PropertyList H5PropertyList::linkCreate() {
  H5PropertyList list;
  list.id_ = detail::H5Id(ASTRA_H5_CHECK(H5Pcreate(H5P_LINK_CREATE)), detail::H5Kind::PropertyList);
  return list;
}

void H5PropertyList::setChunk(std::span<const std::uint64_t> chunk_dims) {
  const std::vector<hsize_t> dims(chunk_dims.begin(), chunk_dims.end());
  ASTRA_H5_CHECK(H5Pset_chunk(id(), static_cast<int>(dims.size()), dims.data()));
}

void H5PropertyList::setDeflate(unsigned level) { ASTRA_H5_CHECK(H5Pset_deflate(id(), level)); }

void H5PropertyList::setCreateIntermediateGroups() { ASTRA_H5_CHECK(H5Pset_create_intermediate_group(id(), 1)); }

}  // namespace astraflow::io
