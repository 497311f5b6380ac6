// H5Attribute and the typed attributes of files, groups and datasets (H5Object).
#include <fmt/format.h>

#include <vector>

#include "io/h5_check.hpp"

namespace astraflow::io {

// ---- H5Attribute -------------------------------------------------------------------------

H5Attribute H5Attribute::create(const H5Object& owner, const std::string& name, const H5Datatype& type,
                                const H5Dataspace& space) {
  H5Attribute attr;
  attr.id_ =
      detail::H5Id(ASTRA_H5_CHECK(H5Acreate2(owner.id(), name.c_str(), type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT),
                                  fmt::format("creating attribute '{}' on '{}'", name, owner.name())),
                   detail::H5Kind::Attribute);
  return attr;
}

H5Attribute H5Attribute::open(const H5Object& owner, const std::string& name) {
  H5Attribute attr;
  attr.id_ = detail::H5Id(ASTRA_H5_CHECK(H5Aopen(owner.id(), name.c_str(), H5P_DEFAULT),
                                         fmt::format("opening attribute '{}' of '{}'", name, owner.name())),
                          detail::H5Kind::Attribute);
  return attr;
}

H5Datatype H5Attribute::type() const { return H5Datatype::adopt(ASTRA_H5_CHECK(H5Aget_type(id()))); }

H5Dataspace H5Attribute::space() const { return H5Dataspace::adopt(ASTRA_H5_CHECK(H5Aget_space(id()))); }

void H5Attribute::write(const H5Datatype& mem_type, const void* data) const {
  ASTRA_H5_CHECK(H5Awrite(id(), mem_type.id(), data));
}

void H5Attribute::read(const H5Datatype& mem_type, void* out) const {
  ASTRA_H5_CHECK(H5Aread(id(), mem_type.id(), out));
}

// ---- typed attributes on H5Object ----------------------------------------------------------

namespace {

// Replaces any attribute of that name: attributes cannot change type in place.
H5Attribute recreate(const H5Object& owner, const std::string& name, const H5Datatype& type) {
  if (owner.hasAttribute(name)) {
    ASTRA_H5_CHECK(H5Adelete(owner.id(), name.c_str()),
                   fmt::format("replacing attribute '{}' of '{}'", name, owner.name()));
  }
  return H5Attribute::create(owner, name, type, H5Dataspace::scalar());
}

// Opens a scalar attribute whose stored type has class `wanted`, or fails saying what it is.
H5Attribute openScalarOfClass(const H5Object& owner, const std::string& name, H5T_class_t wanted,
                              std::string_view wanted_text) {
  auto attr = H5Attribute::open(owner, name);
  const auto type = attr.type();
  const H5T_class_t cls = ASTRA_H5_CHECK(H5Tget_class(type.id()));
  const auto space = attr.space();
  const bool is_scalar = space.rank() == 0 || space.elementCount() == 1;
  if (cls != wanted || !is_scalar) {
    ASTRA_H5_FAIL(fmt::format("attribute '{}' of '{}' in '{}' holds {}{}, read as {}", name, owner.name(),
                              owner.fileName(), type.describe(), is_scalar ? "" : " (not a single value)",
                              wanted_text));
  }
  return attr;
}

}  // namespace

bool H5Object::hasAttribute(const std::string& attr) const {
  return ASTRA_H5_CHECK(H5Aexists(id(), attr.c_str()), fmt::format("looking up attribute '{}' of '{}'", attr, name())) >
         0;
}

void H5Object::writeAttribute(const std::string& attr, std::string_view value) const {
  // Variable-length UTF-8: h5py reads it back as str, and any length fits.
  const auto type = H5Datatype::variableString();
  const std::string copy(value);  // NUL-terminated
  const char* data = copy.c_str();
  recreate(*this, attr, type).write(type, &data);
}

void H5Object::writeAttribute(const std::string& attr, std::int64_t value) const {
  recreate(*this, attr, H5Datatype::fileTypeOf(ElementType::Int64)).write(H5Datatype::of(ElementType::Int64), &value);
}

void H5Object::writeAttribute(const std::string& attr, double value) const {
  recreate(*this, attr, H5Datatype::fileTypeOf(ElementType::Float64))
      .write(H5Datatype::of(ElementType::Float64), &value);
}

std::string H5Object::readStringAttribute(const std::string& attr) const {
  const auto opened = openScalarOfClass(*this, attr, H5T_STRING, "a string");
  const auto stored = opened.type();
  if (ASTRA_H5_CHECK(H5Tis_variable_str(stored.id())) > 0) {
    const auto mem = H5Datatype::variableString();
    char* data = nullptr;
    opened.read(mem, &data);
    std::string out = data != nullptr ? std::string(data) : std::string();
    H5free_memory(data);
    return out;
  }
  // Fixed-length: read the bytes as stored and stop at the first NUL (padding).
  const std::size_t bytes = stored.size();
  std::vector<char> buffer(bytes + 1, '\0');
  opened.read(stored, buffer.data());
  return std::string(buffer.data());
}

std::int64_t H5Object::readInt64Attribute(const std::string& attr) const {
  const auto opened = openScalarOfClass(*this, attr, H5T_INTEGER, "an integer");
  const auto stored = opened.type();
  if (stored.size() > 8 || (stored.size() == 8 && !stored.holds(ElementType::Int64))) {
    ASTRA_H5_FAIL(
        fmt::format("attribute '{}' of '{}' holds {}, which does not fit int64", attr, name(), stored.describe()));
  }
  std::int64_t value = 0;
  opened.read(H5Datatype::of(ElementType::Int64), &value);
  return value;
}

double H5Object::readDoubleAttribute(const std::string& attr) const {
  const auto opened = openScalarOfClass(*this, attr, H5T_FLOAT, "a floating-point number");
  double value = 0;
  opened.read(H5Datatype::of(ElementType::Float64), &value);
  return value;
}

std::string H5Object::name() const {
  const ssize_t length = ASTRA_H5_CHECK(H5Iget_name(id(), nullptr, 0));
  std::string out(static_cast<std::size_t>(length) + 1, '\0');
  ASTRA_H5_CHECK(H5Iget_name(id(), out.data(), out.size()));
  out.resize(static_cast<std::size_t>(length));
  return out;
}

std::string H5Object::fileName() const {
  const ssize_t length = ASTRA_H5_CHECK(H5Fget_name(id(), nullptr, 0));
  std::string out(static_cast<std::size_t>(length) + 1, '\0');
  ASTRA_H5_CHECK(H5Fget_name(id(), out.data(), out.size()));
  out.resize(static_cast<std::size_t>(length));
  return out;
}

}  // namespace astraflow::io
