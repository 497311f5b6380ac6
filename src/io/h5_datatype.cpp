// H5Datatype: element, string, variable-length and compound types, and the checks that a
// stored type is what a reader asks for.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/h5_check.hpp"

namespace astraflow::io {

std::string_view elementTypeName(ElementType type) {
  switch (type) {
    case ElementType::Int32: return "int32";
    case ElementType::Int64: return "int64";
    case ElementType::UInt16: return "uint16";
    case ElementType::UInt64: return "uint64";
    case ElementType::Float32: return "float32";
    case ElementType::Float64: return "float64";
  }
  return "?";
}

namespace detail {

hid_t nativeTypeOf(ElementType type) {
  switch (type) {
    case ElementType::Int32: return H5T_NATIVE_INT32;
    case ElementType::Int64: return H5T_NATIVE_INT64;
    case ElementType::UInt16: return H5T_NATIVE_UINT16;
    case ElementType::UInt64: return H5T_NATIVE_UINT64;
    case ElementType::Float32: return H5T_NATIVE_FLOAT;
    case ElementType::Float64: return H5T_NATIVE_DOUBLE;
  }
  ASTRA_H5_FAIL("unknown ElementType");
}

std::size_t elementSize(ElementType type) {
  switch (type) {
    case ElementType::Int32: return 4;
    case ElementType::Int64: return 8;
    case ElementType::UInt16: return 2;
    case ElementType::UInt64: return 8;
    case ElementType::Float32: return 4;
    case ElementType::Float64: return 8;
  }
  ASTRA_H5_FAIL("unknown ElementType");
}

}  // namespace detail

namespace {

// Files use one fixed byte order so that they read the same everywhere.
hid_t standardTypeOf(ElementType type) {
  switch (type) {
    case ElementType::Int32: return H5T_STD_I32LE;
    case ElementType::Int64: return H5T_STD_I64LE;
    case ElementType::UInt16: return H5T_STD_U16LE;
    case ElementType::UInt64: return H5T_STD_U64LE;
    case ElementType::Float32: return H5T_IEEE_F32LE;
    case ElementType::Float64: return H5T_IEEE_F64LE;
  }
  ASTRA_H5_FAIL("unknown ElementType");
}

bool isSignedType(ElementType type) { return type == ElementType::Int32 || type == ElementType::Int64; }

bool isFloatType(ElementType type) { return type == ElementType::Float32 || type == ElementType::Float64; }

}  // namespace

H5Datatype H5Datatype::adopt(std::int64_t id) {
  H5Datatype type;
  type.id_ = detail::H5Id(id, detail::H5Kind::Datatype);
  return type;
}

H5Datatype H5Datatype::of(ElementType type) { return adopt(ASTRA_H5_CHECK(H5Tcopy(detail::nativeTypeOf(type)))); }

H5Datatype H5Datatype::fileTypeOf(ElementType type) { return adopt(ASTRA_H5_CHECK(H5Tcopy(standardTypeOf(type)))); }

H5Datatype H5Datatype::fixedString(std::size_t bytes) {
  auto type = adopt(ASTRA_H5_CHECK(H5Tcopy(H5T_C_S1)));
  ASTRA_H5_CHECK(H5Tset_size(type.id(), bytes));
  // NUL padding rather than NUL termination: a field of 16 bytes holds 16 characters.
  ASTRA_H5_CHECK(H5Tset_strpad(type.id(), H5T_STR_NULLPAD));
  ASTRA_H5_CHECK(H5Tset_cset(type.id(), H5T_CSET_UTF8));
  return type;
}

H5Datatype H5Datatype::variableString() {
  auto type = adopt(ASTRA_H5_CHECK(H5Tcopy(H5T_C_S1)));
  ASTRA_H5_CHECK(H5Tset_size(type.id(), H5T_VARIABLE));
  ASTRA_H5_CHECK(H5Tset_cset(type.id(), H5T_CSET_UTF8));
  return type;
}

H5Datatype H5Datatype::variableLengthOf(const H5Datatype& base) {
  return adopt(ASTRA_H5_CHECK(H5Tvlen_create(base.id())));
}

H5Datatype H5Datatype::compound(std::size_t bytes) { return adopt(ASTRA_H5_CHECK(H5Tcreate(H5T_COMPOUND, bytes))); }

void H5Datatype::insertMember(const std::string& name, std::size_t offset, const H5Datatype& member) {
  ASTRA_H5_CHECK(H5Tinsert(id(), name.c_str(), offset, member.id()), fmt::format("adding compound member '{}'", name));
}

std::size_t H5Datatype::size() const {
  const std::size_t bytes = H5Tget_size(id());
  if (bytes == 0) detail::throwCallFailure("H5Tget_size(id())", __FILE__, __LINE__, {});
  return bytes;
}

bool H5Datatype::isCompound() const { return ASTRA_H5_CHECK(H5Tget_class(id())) == H5T_COMPOUND; }

std::vector<std::string> H5Datatype::memberNames() const {
  if (!isCompound()) ASTRA_H5_FAIL(fmt::format("{} is not a compound type", describe()));
  const int count = ASTRA_H5_CHECK(H5Tget_nmembers(id()));
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    char* name = H5Tget_member_name(id(), static_cast<unsigned>(i));
    if (name == nullptr) detail::throwCallFailure("H5Tget_member_name", __FILE__, __LINE__, {});
    names.emplace_back(name);
    H5free_memory(name);
  }
  return names;
}

bool H5Datatype::holds(ElementType type) const {
  const H5T_class_t cls = ASTRA_H5_CHECK(H5Tget_class(id()));
  if (H5Tget_size(id()) != detail::elementSize(type)) return false;
  if (isFloatType(type)) return cls == H5T_FLOAT;
  if (cls != H5T_INTEGER) return false;
  const H5T_sign_t sign = ASTRA_H5_CHECK(H5Tget_sign(id()));
  return (sign == H5T_SGN_2) == isSignedType(type);
}

std::string H5Datatype::describe() const {
  const H5T_class_t cls = ASTRA_H5_CHECK(H5Tget_class(id()));
  const std::size_t bytes = H5Tget_size(id());
  switch (cls) {
    case H5T_INTEGER: {
      const bool is_signed = ASTRA_H5_CHECK(H5Tget_sign(id())) == H5T_SGN_2;
      return fmt::format("{}int{}", is_signed ? "" : "u", bytes * 8);
    }
    case H5T_FLOAT: return fmt::format("float{}", bytes * 8);
    case H5T_STRING:
      return ASTRA_H5_CHECK(H5Tis_variable_str(id())) > 0 ? std::string("string(variable)")
                                                          : fmt::format("string({})", bytes);
    case H5T_VLEN: {
      const auto base = adopt(ASTRA_H5_CHECK(H5Tget_super(id())));
      return fmt::format("vlen<{}>", base.describe());
    }
    case H5T_COMPOUND: return fmt::format("compound{{{}}}", fmt::join(memberNames(), ","));
    default: return fmt::format("HDF5 type class {} of {} bytes", static_cast<int>(cls), bytes);
  }
}

}  // namespace astraflow::io
