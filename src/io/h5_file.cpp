// H5File: creating, opening and flushing files.
#include <fmt/format.h>

#include "io/h5_check.hpp"

namespace astraflow::io {

// Files use the default (earliest) format so that a file left open by a crashed writer
// still opens: later superblock versions mark the file "open for writing" and need h5clear.
H5File H5File::create(const std::string& path) {
  const hid_t id = ASTRA_H5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                                  fmt::format("creating file '{}'", path));
  return H5File(id, path);
}

H5File H5File::openReadOnly(const std::string& path) {
  const hid_t id = ASTRA_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT),
                                  fmt::format("opening file '{}' read-only", path));
  return H5File(id, path);
}

H5File H5File::openReadWrite(const std::string& path) {
  const hid_t id = ASTRA_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT),
                                  fmt::format("opening file '{}' read-write", path));
  return H5File(id, path);
}

std::string H5File::runIdOf(const std::string& path) {
  const H5File file = openReadOnly(path);
  return file.hasAttribute("run_id") ? file.readStringAttribute("run_id") : std::string();
}

void H5File::flush() const {
  ASTRA_H5_CHECK(H5Fflush(id(), H5F_SCOPE_LOCAL), fmt::format("flushing file '{}'", path_));
}

}  // namespace astraflow::io
