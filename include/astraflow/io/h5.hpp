#pragma once
// Owning wrappers around HDF5 handles (HighFive-style: one object owns one identifier) and the
// typed reads and writes the run's files need (docs: docs/architecture.md §10).
//
// <hdf5.h> stays out of this header so that every module touching a file does not pay for
// it; handles appear as std::int64_t, which is what hid_t is since HDF5 1.10 (checked by a
// static_assert in src/io). Every failed HDF5 call throws astraflow::H5Error; destructors
// never throw, they log a failed close through spdlog.
//
// Nothing here is collective: HDF5 is used without MPI-IO, and each file has exactly one
// writing rank (section 10).
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "astraflow/core/error.hpp"

namespace astraflow {

// A failed HDF5 call, or a file whose content does not match what the reader asked for. The
// message carries processLocation(), the source file:line, the call's text and the HDF5
// error stack.
class H5Error : public Error {
 public:
  using Error::Error;
};

}  // namespace astraflow

namespace astraflow::io {

// The element types the typed helpers read and write. bf16 weights are stored as UInt16 with
// a dtype attribute (section 10), so no 16-bit float is needed here.
enum class ElementType : std::uint8_t { Int32, Int64, UInt16, UInt64, Float32, Float64 };

template <class T>
concept H5Scalar = std::same_as<T, std::int32_t> || std::same_as<T, std::int64_t> || std::same_as<T, std::uint16_t> ||
    std::same_as<T, std::uint64_t> || std::same_as<T, float> || std::same_as<T, double>;

template <H5Scalar T>
constexpr ElementType elementTypeOf() {
  if constexpr (std::same_as<T, std::int32_t>) return ElementType::Int32;
  if constexpr (std::same_as<T, std::int64_t>) return ElementType::Int64;
  if constexpr (std::same_as<T, std::uint16_t>) return ElementType::UInt16;
  if constexpr (std::same_as<T, std::uint64_t>) return ElementType::UInt64;
  if constexpr (std::same_as<T, float>) return ElementType::Float32;
  if constexpr (std::same_as<T, double>) return ElementType::Float64;
}

std::string_view elementTypeName(ElementType type);  // "int32", "float64", ...

// A contiguous range of one H5Scalar type (std::vector, std::array, std::span, ...).
template <class R>
concept H5ScalarRange = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
    H5Scalar<std::remove_cv_t<std::ranges::range_value_t<R>>>;

// A 2-D dataset read back whole, row-major.
template <H5Scalar T>
struct RowMatrix {
  std::uint64_t rows = 0;
  std::uint64_t cols = 0;
  std::vector<T> values;

  const T& at(std::uint64_t row, std::uint64_t col) const { return values[row * cols + col]; }
};

using Sequences = std::vector<std::vector<std::int32_t>>;

namespace detail {

enum class H5Kind : std::uint8_t { File, Group, Dataset, Dataspace, Datatype, PropertyList, Attribute };

// One owned identifier. Closing uses the close call of its kind and only logs on failure,
// because it runs from destructors.
class H5Id {
 public:
  H5Id() noexcept = default;
  H5Id(std::int64_t id, H5Kind kind) noexcept : id_(id), kind_(kind) {}
  H5Id(H5Id&& other) noexcept : id_(other.id_), kind_(other.kind_) { other.id_ = -1; }
  H5Id& operator=(H5Id&& other) noexcept;
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  ~H5Id() { close(); }

  std::int64_t get() const noexcept { return id_; }
  bool valid() const noexcept { return id_ >= 0; }
  void close() noexcept;

 private:
  std::int64_t id_ = -1;
  H5Kind kind_ = H5Kind::File;
};

}  // namespace detail

class H5Datatype;
class H5Dataspace;
class H5PropertyList;
class H5Attribute;
class H5Dataset;
class H5Group;

// ---- handles that are not objects in the file --------------------------------------------

class H5Dataspace {
 public:
  H5Dataspace() = default;
  static H5Dataspace scalar();
  // maxdims empty: fixed size. An entry of kUnlimited makes that dimension extendible.
  static H5Dataspace simple(std::span<const std::uint64_t> dims, std::span<const std::uint64_t> maxdims = {});
  static H5Dataspace adopt(std::int64_t id);  // takes ownership of an id from HDF5

  static constexpr std::uint64_t kUnlimited = ~std::uint64_t{0};

  int rank() const;
  std::vector<std::uint64_t> dims() const;
  std::vector<std::uint64_t> maxDims() const;  // kUnlimited where unlimited
  std::uint64_t elementCount() const;
  // Select [start, start+count) per dimension (replaces the selection).
  void selectHyperslab(std::span<const std::uint64_t> start, std::span<const std::uint64_t> count);

  std::int64_t id() const noexcept { return id_.get(); }
  bool valid() const noexcept { return id_.valid(); }

 private:
  detail::H5Id id_;
};

class H5Datatype {
 public:
  H5Datatype() = default;
  static H5Datatype of(ElementType type);            // native-order copy
  static H5Datatype fileTypeOf(ElementType type);    // little-endian standard type
  static H5Datatype fixedString(std::size_t bytes);  // NUL-padded, UTF-8
  static H5Datatype variableString();                // UTF-8
  static H5Datatype variableLengthOf(const H5Datatype& base);
  static H5Datatype compound(std::size_t bytes);
  static H5Datatype adopt(std::int64_t id);

  // Compound types only: add one member at a byte offset.
  void insertMember(const std::string& name, std::size_t offset, const H5Datatype& member);

  std::size_t size() const;
  bool isCompound() const;
  std::vector<std::string> memberNames() const;  // compound types only
  // Whether values of this (file) type can be read as `type` without changing meaning:
  // same class, size and signedness; byte order may differ.
  bool holds(ElementType type) const;
  std::string describe() const;  // "int32", "string(16)", "vlen<int32>", "compound{a,b}"

  std::int64_t id() const noexcept { return id_.get(); }
  bool valid() const noexcept { return id_.valid(); }

 private:
  detail::H5Id id_;
};

class H5PropertyList {
 public:
  H5PropertyList() = default;  // stands for H5P_DEFAULT
  static H5PropertyList datasetCreate();
  static H5PropertyList linkCreate();

  void setChunk(std::span<const std::uint64_t> chunk_dims);  // dataset-create lists
  void setDeflate(unsigned level);                           // dataset-create lists
  void setCreateIntermediateGroups();                        // link-create lists

  // H5P_DEFAULT (0) for a default-constructed list.
  std::int64_t id() const noexcept { return id_.valid() ? id_.get() : 0; }

 private:
  detail::H5Id id_;
};

// ---- objects in the file (files, groups, datasets): they carry attributes -----------------

class H5Object {
 public:
  std::int64_t id() const noexcept { return id_.get(); }
  bool valid() const noexcept { return id_.valid(); }
  explicit operator bool() const noexcept { return valid(); }
  std::string name() const;  // path inside the file, for messages
  std::string fileName() const;

  bool hasAttribute(const std::string& attr) const;
  // Writing replaces an attribute of the same name, whatever its old type.
  void writeAttribute(const std::string& attr, std::string_view value) const;
  void writeAttribute(const std::string& attr, const char* value) const {
    writeAttribute(attr, std::string_view(value));
  }
  void writeAttribute(const std::string& attr, std::int64_t value) const;
  void writeAttribute(const std::string& attr, double value) const;
  template <std::integral I>
  requires(!std::same_as<I, bool> && !std::same_as<I, std::int64_t>) void writeAttribute(const std::string& attr,
                                                                                         I value) const {
    writeAttribute(attr, static_cast<std::int64_t>(value));
  }
  // Reads validate the stored type (string, any integer, any float) and that it is scalar.
  std::string readStringAttribute(const std::string& attr) const;
  std::int64_t readInt64Attribute(const std::string& attr) const;
  double readDoubleAttribute(const std::string& attr) const;

 protected:
  H5Object() = default;
  H5Object(std::int64_t id, detail::H5Kind kind) noexcept : id_(id, kind) {}
  ~H5Object() = default;
  H5Object(H5Object&&) noexcept = default;
  H5Object& operator=(H5Object&&) noexcept = default;

  detail::H5Id id_;
};

class H5Attribute {
 public:
  H5Attribute() = default;
  static H5Attribute create(const H5Object& owner, const std::string& name, const H5Datatype& type,
                            const H5Dataspace& space);
  static H5Attribute open(const H5Object& owner, const std::string& name);

  H5Datatype type() const;
  H5Dataspace space() const;
  void write(const H5Datatype& mem_type, const void* data) const;
  void read(const H5Datatype& mem_type, void* out) const;

  std::int64_t id() const noexcept { return id_.get(); }
  bool valid() const noexcept { return id_.valid(); }

 private:
  detail::H5Id id_;
};

class H5Dataset : public H5Object {
 public:
  H5Dataset() = default;
  static H5Dataset adopt(std::int64_t id);

  H5Datatype type() const;
  H5Dataspace space() const;
  std::vector<std::uint64_t> shape() const;
  std::uint64_t rows() const;  // first dimension

  // Whole-dataset reads; the stored type and rank must match, else H5Error.
  template <H5Scalar T>
  std::vector<T> readVector() const {
    std::vector<T> out(checkedElementCount(elementTypeOf<T>(), 1));
    readAll(elementTypeOf<T>(), out.data());
    return out;
  }
  template <H5Scalar T>
  RowMatrix<T> readMatrix() const {
    RowMatrix<T> out;
    out.values.resize(checkedElementCount(elementTypeOf<T>(), 2));
    const auto dims = shape();
    out.rows = dims[0];
    out.cols = dims[1];
    readAll(elementTypeOf<T>(), out.values.data());
    return out;
  }

  // Extendible datasets: grow the first dimension by values.size()/columns rows, row-major.
  template <H5ScalarRange R>
  void appendRows(const R& values) const {
    using T = std::remove_cv_t<std::ranges::range_value_t<R>>;
    appendElements(elementTypeOf<T>(), std::ranges::data(values), std::ranges::size(values));
  }
  // Same for any memory type (compound records...): `rows` rows of mem_type.
  void appendRaw(const H5Datatype& mem_type, const void* data, std::uint64_t rows) const;
  // Reads the whole dataset into `out` (sized by the caller from shape()).
  void readRaw(const H5Datatype& mem_type, void* out) const;

  // Variable-length int32 datasets (token sequences), 1-D and extendible.
  void appendSequences(const Sequences& sequences) const;
  Sequences readSequences() const;

  // Variable-length UTF-8 string datasets (names), 1-D and extendible. A string is stored up
  // to its first NUL.
  void appendStrings(const std::vector<std::string>& strings) const;
  std::vector<std::string> readStrings() const;

 private:
  friend class H5Location;
  explicit H5Dataset(std::int64_t id) noexcept : H5Object(id, detail::H5Kind::Dataset) {}

  std::uint64_t checkedElementCount(ElementType type, int rank) const;
  void readAll(ElementType type, void* out) const;
  void appendElements(ElementType type, const void* data, std::size_t count) const;
};

// A file or a group: a place that holds groups and datasets. Paths may be nested ("a/b/c").
class H5Location : public H5Object {
 public:
  // Creates missing intermediate groups too.
  H5Group createGroup(const std::string& path) const;
  H5Group openGroup(const std::string& path) const;
  // Whether every link along `path` exists (no error for a missing intermediate group).
  bool exists(const std::string& path) const;
  std::vector<std::string> childNames() const;  // links directly below, in name order

  H5Dataset createDataset(const std::string& path, const H5Datatype& file_type, const H5Dataspace& space,
                          const H5PropertyList& dcpl = {}) const;
  H5Dataset openDataset(const std::string& path) const;

  // A fixed-size 1-D dataset holding `values`.
  template <H5ScalarRange R>
  H5Dataset writeVector(const std::string& path, const R& values) const {
    using T = std::remove_cv_t<std::ranges::range_value_t<R>>;
    return writeElements(path, elementTypeOf<T>(), std::ranges::data(values), std::ranges::size(values));
  }
  template <H5Scalar T>
  std::vector<T> readVector(const std::string& path) const {
    return openDataset(path).readVector<T>();
  }

  // An empty chunked dataset that appendRows grows: 1-D when columns == 0, else 2-D with a
  // fixed second dimension. chunk_rows == 0 picks about 64 KiB per chunk.
  template <H5Scalar T>
  H5Dataset createExtendible(const std::string& path, std::uint64_t columns = 0, std::uint64_t chunk_rows = 0) const {
    return createExtendible(path, H5Datatype::fileTypeOf(elementTypeOf<T>()), columns, chunk_rows);
  }
  H5Dataset createExtendible(const std::string& path, const H5Datatype& file_type, std::uint64_t columns = 0,
                             std::uint64_t chunk_rows = 0) const;

  // An empty extendible 1-D dataset of variable-length int32 arrays.
  H5Dataset createSequences(const std::string& path, std::uint64_t chunk_rows = 0) const;
  H5Dataset writeSequences(const std::string& path, const Sequences& sequences) const;

  // An empty extendible 1-D dataset of variable-length UTF-8 strings.
  H5Dataset createStrings(const std::string& path, std::uint64_t chunk_rows = 0) const;

 protected:
  H5Location() = default;
  H5Location(std::int64_t id, detail::H5Kind kind) noexcept : H5Object(id, kind) {}
  ~H5Location() = default;
  // Protected so a file or group cannot be sliced into a bare location.
  H5Location(H5Location&&) noexcept = default;
  H5Location& operator=(H5Location&&) noexcept = default;

 private:
  H5Dataset writeElements(const std::string& path, ElementType type, const void* data, std::size_t count) const;
};

class H5Group : public H5Location {
 public:
  H5Group() = default;

 private:
  friend class H5Location;
  explicit H5Group(std::int64_t id) noexcept : H5Location(id, detail::H5Kind::Group) {}
};

class H5File : public H5Location {
 public:
  H5File() = default;
  // Creates `path`, truncating an existing file.
  static H5File create(const std::string& path);
  static H5File openReadOnly(const std::string& path);
  static H5File openReadWrite(const std::string& path);
  // The "run_id" attribute an astraflow file of a run carries (core/run_files.hpp); empty when
  // it has none. Throws H5Error when the file cannot be opened.
  static std::string runIdOf(const std::string& path);

  // Writes everything buffered by HDF5 to disk, so that a crash after this leaves the file
  // readable with its content as of now.
  void flush() const;
  const std::string& path() const noexcept { return path_; }

 private:
  H5File(std::int64_t id, std::string path) noexcept : H5Location(id, detail::H5Kind::File), path_(std::move(path)) {}

  std::string path_;
};

}  // namespace astraflow::io
