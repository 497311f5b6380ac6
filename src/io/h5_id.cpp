// Closing owned HDF5 identifiers without throwing.
#include <spdlog/spdlog.h>

#include "io/h5_check.hpp"

namespace astraflow::io::detail {
namespace {

const char* kindName(H5Kind kind) {
  switch (kind) {
    case H5Kind::File: return "file";
    case H5Kind::Group: return "group";
    case H5Kind::Dataset: return "dataset";
    case H5Kind::Dataspace: return "dataspace";
    case H5Kind::Datatype: return "datatype";
    case H5Kind::PropertyList: return "property list";
    case H5Kind::Attribute: return "attribute";
  }
  return "handle";
}

herr_t closeByKind(hid_t id, H5Kind kind) {
  switch (kind) {
    case H5Kind::File: return H5Fclose(id);
    case H5Kind::Group: return H5Gclose(id);
    case H5Kind::Dataset: return H5Dclose(id);
    case H5Kind::Dataspace: return H5Sclose(id);
    case H5Kind::Datatype: return H5Tclose(id);
    case H5Kind::PropertyList: return H5Pclose(id);
    case H5Kind::Attribute: return H5Aclose(id);
  }
  return -1;
}

}  // namespace

H5Id& H5Id::operator=(H5Id&& other) noexcept {
  if (this != &other) {
    close();
    id_ = other.id_;
    kind_ = other.kind_;
    other.id_ = -1;
  }
  return *this;
}

void H5Id::close() noexcept {
  if (id_ < 0) return;
  const hid_t id = id_;
  id_ = -1;
  silenceAutoErrorPrinting();
  if (closeByKind(id, kind_) < 0) {
    // A destructor must not throw; a failed close (usually a failed final write of cached
    // data) is logged so that it is not silent.
    try {
      spdlog::error("HDF5: closing {} id {} failed:{}", kindName(kind_), id, takeErrorStack());
    } catch (...) {  // logging itself failed: nothing more can be done here
    }
  }
}

}  // namespace astraflow::io::detail
