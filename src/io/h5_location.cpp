// H5Location (files and groups): nested groups and the creation of datasets.
#include <fmt/format.h>

#include <algorithm>

#include "io/h5_check.hpp"

namespace astraflow::io {
namespace {

// About this many bytes per chunk when the caller does not choose: large enough that
// appending stays cheap, small enough that reading a few rows does not pull megabytes.
constexpr std::uint64_t kTargetChunkBytes = 64 * 1024;

std::uint64_t autoChunkRows(std::uint64_t row_bytes) {
  return std::max<std::uint64_t>(1, kTargetChunkBytes / std::max<std::uint64_t>(1, row_bytes));
}

}  // namespace

H5Group H5Location::createGroup(const std::string& path) const {
  auto lcpl = H5PropertyList::linkCreate();
  lcpl.setCreateIntermediateGroups();
  return H5Group(ASTRA_H5_CHECK(H5Gcreate2(id(), path.c_str(), lcpl.id(), H5P_DEFAULT, H5P_DEFAULT),
                                fmt::format("creating group '{}' in '{}'", path, name())));
}

H5Group H5Location::openGroup(const std::string& path) const {
  return H5Group(ASTRA_H5_CHECK(H5Gopen2(id(), path.c_str(), H5P_DEFAULT),
                                fmt::format("opening group '{}' in '{}' of '{}'", path, name(), fileName())));
}

namespace {

herr_t collectName(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

}  // namespace

std::vector<std::string> H5Location::childNames() const {
  std::vector<std::string> names;
  hsize_t index = 0;
  ASTRA_H5_CHECK(H5Literate(id(), H5_INDEX_NAME, H5_ITER_INC, &index, collectName, &names),
                 fmt::format("listing '{}'", name()));
  return names;
}

bool H5Location::exists(const std::string& path) const {
  // H5Lexists fails rather than answering false when an intermediate group is missing, so
  // walk the path one component at a time.
  std::string prefix;
  std::size_t begin = 0;
  if (!path.empty() && path[0] == '/') {
    prefix = "/";
    begin = 1;
  }
  while (begin <= path.size()) {
    std::size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    if (end > begin) {
      if (!prefix.empty() && prefix.back() != '/') prefix += '/';
      prefix += path.substr(begin, end - begin);
      if (ASTRA_H5_CHECK(H5Lexists(id(), prefix.c_str(), H5P_DEFAULT),
                         fmt::format("looking up '{}' in '{}'", prefix, name())) <= 0) {
        return false;
      }
      if (end < path.size() && ASTRA_H5_CHECK(H5Oexists_by_name(id(), prefix.c_str(), H5P_DEFAULT)) <= 0) {
        return false;  // a dangling soft link: nothing below it exists
      }
    }
    begin = end + 1;
  }
  return true;
}

H5Dataset H5Location::createDataset(const std::string& path, const H5Datatype& file_type, const H5Dataspace& space,
                                    const H5PropertyList& dcpl) const {
  auto lcpl = H5PropertyList::linkCreate();
  lcpl.setCreateIntermediateGroups();
  return H5Dataset(
      ASTRA_H5_CHECK(H5Dcreate2(id(), path.c_str(), file_type.id(), space.id(), lcpl.id(), dcpl.id(), H5P_DEFAULT),
                     fmt::format("creating dataset '{}' in '{}'", path, name())));
}

H5Dataset H5Location::openDataset(const std::string& path) const {
  return H5Dataset(ASTRA_H5_CHECK(H5Dopen2(id(), path.c_str(), H5P_DEFAULT),
                                  fmt::format("opening dataset '{}' in '{}' of '{}'", path, name(), fileName())));
}

H5Dataset H5Location::writeElements(const std::string& path, ElementType type, const void* data,
                                    std::size_t count) const {
  const std::uint64_t dims[] = {count};
  auto dataset = createDataset(path, H5Datatype::fileTypeOf(type), H5Dataspace::simple(dims));
  if (count > 0) {
    ASTRA_H5_CHECK(H5Dwrite(dataset.id(), detail::nativeTypeOf(type), H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
                   fmt::format("writing {} values to '{}'", count, path));
  }
  return dataset;
}

H5Dataset H5Location::createExtendible(const std::string& path, const H5Datatype& file_type, std::uint64_t columns,
                                       std::uint64_t chunk_rows) const {
  const std::uint64_t row_elements = std::max<std::uint64_t>(1, columns);
  if (chunk_rows == 0) chunk_rows = autoChunkRows(row_elements * file_type.size());
  auto dcpl = H5PropertyList::datasetCreate();
  if (columns == 0) {
    const std::uint64_t dims[] = {0};
    const std::uint64_t max[] = {H5Dataspace::kUnlimited};
    const std::uint64_t chunk[] = {chunk_rows};
    dcpl.setChunk(chunk);
    return createDataset(path, file_type, H5Dataspace::simple(dims, max), dcpl);
  }
  const std::uint64_t dims[] = {0, columns};
  const std::uint64_t max[] = {H5Dataspace::kUnlimited, columns};
  const std::uint64_t chunk[] = {chunk_rows, columns};
  dcpl.setChunk(chunk);
  return createDataset(path, file_type, H5Dataspace::simple(dims, max), dcpl);
}

H5Dataset H5Location::createSequences(const std::string& path, std::uint64_t chunk_rows) const {
  // A vlen element is stored as a reference into the global heap (16 bytes), so the chunk
  // size counts sequences, not tokens.
  const auto file_type = H5Datatype::variableLengthOf(H5Datatype::fileTypeOf(ElementType::Int32));
  return createExtendible(path, file_type, 0, chunk_rows == 0 ? 1024 : chunk_rows);
}

H5Dataset H5Location::writeSequences(const std::string& path, const Sequences& sequences) const {
  auto dataset = createSequences(path);
  dataset.appendSequences(sequences);
  return dataset;
}

}  // namespace astraflow::io
