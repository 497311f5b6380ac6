// Parquet files, Arrow IPC files and streams, and Hugging Face `datasets` folders read row by row
// as JSON objects (table_reader.hpp): one record batch in memory at a time, each value converted
// by its Arrow type.
#include "tasks/table_reader.hpp"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <fmt/format.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "astraflow/core/error.hpp"
#include "tasks/jsonl_reader.hpp"

namespace astraflow::detail {
namespace {

using json = nlohmann::ordered_json;

[[noreturn]] void fail(const std::filesystem::path& path, const char* what, const std::string& why) {
  throw Error(fmt::format("{} {}: cannot be read as a table ({})", what, path.string(), why));
}

template <class T>
T orFail(arrow::Result<T> result, const std::filesystem::path& path, const char* what) {
  if (!result.ok()) fail(path, what, result.status().ToString());
  return std::move(result).ValueUnsafe();
}

json valueAt(const arrow::Array& array, int64_t row);

template <class ListArray>
json listAt(const arrow::Array& array, int64_t row) {
  const auto& list = static_cast<const ListArray&>(array);
  json out = json::array();
  const auto begin = list.value_offset(row), length = list.value_length(row);
  for (int64_t k = 0; k < length; ++k) out.push_back(valueAt(*list.values(), begin + k));
  return out;
}

json structAt(const arrow::Array& array, int64_t row) {
  const auto& s = static_cast<const arrow::StructArray&>(array);
  json out = json::object();
  for (int k = 0; k < s.num_fields(); ++k) out[s.struct_type()->field(k)->name()] = valueAt(*s.field(k), row);
  return out;
}

json mapAt(const arrow::Array& array, int64_t row) {
  const auto& m = static_cast<const arrow::MapArray&>(array);
  json out = json::object();
  for (int64_t k = m.value_offset(row); k < m.value_offset(row) + m.value_length(row); ++k) {
    const json key = valueAt(*m.keys(), k);
    out[key.is_string() ? key.get<std::string>() : key.dump()] = valueAt(*m.items(), k);
  }
  return out;
}

template <class NumericArray>
json numberAt(const arrow::Array& array, int64_t row) {
  const auto v = static_cast<const NumericArray&>(array).Value(row);
  if constexpr (std::is_floating_point_v<decltype(v)>) {
    if (!std::isfinite(v)) return nullptr;
    // A float32 1234.56 is the double 1234.56, not 1234.56005859375: the shortest text of the
    // value at its own width, read back as a double.
    if constexpr (std::is_same_v<std::remove_cv_t<decltype(v)>, float>) return std::stod(fmt::format("{}", v));
  }
  return v;
}

json valueAt(const arrow::Array& array, int64_t row) {
  if (array.IsNull(row)) return nullptr;
  switch (array.type_id()) {
    case arrow::Type::BOOL: return static_cast<const arrow::BooleanArray&>(array).Value(row);
    case arrow::Type::INT8: return numberAt<arrow::Int8Array>(array, row);
    case arrow::Type::INT16: return numberAt<arrow::Int16Array>(array, row);
    case arrow::Type::INT32: return numberAt<arrow::Int32Array>(array, row);
    case arrow::Type::INT64: return numberAt<arrow::Int64Array>(array, row);
    case arrow::Type::UINT8: return numberAt<arrow::UInt8Array>(array, row);
    case arrow::Type::UINT16: return numberAt<arrow::UInt16Array>(array, row);
    case arrow::Type::UINT32: return numberAt<arrow::UInt32Array>(array, row);
    case arrow::Type::UINT64: return numberAt<arrow::UInt64Array>(array, row);
    case arrow::Type::FLOAT: return numberAt<arrow::FloatArray>(array, row);
    case arrow::Type::DOUBLE: return numberAt<arrow::DoubleArray>(array, row);
    case arrow::Type::STRING: return std::string(static_cast<const arrow::StringArray&>(array).GetView(row));
    case arrow::Type::LARGE_STRING: return std::string(static_cast<const arrow::LargeStringArray&>(array).GetView(row));
    case arrow::Type::STRING_VIEW: return std::string(static_cast<const arrow::StringViewArray&>(array).GetView(row));
    case arrow::Type::LIST: return listAt<arrow::ListArray>(array, row);
    case arrow::Type::LARGE_LIST: return listAt<arrow::LargeListArray>(array, row);
    case arrow::Type::FIXED_SIZE_LIST: return listAt<arrow::FixedSizeListArray>(array, row);
    case arrow::Type::STRUCT: return structAt(array, row);
    case arrow::Type::MAP: return mapAt(array, row);
    case arrow::Type::BINARY:
    case arrow::Type::LARGE_BINARY:
    case arrow::Type::BINARY_VIEW:
    case arrow::Type::FIXED_SIZE_BINARY:
      return nullptr;  // bytes (an image's) are no prompt's or answer's: not copied into the row
    case arrow::Type::DICTIONARY: {
      const auto& d = static_cast<const arrow::DictionaryArray&>(array);
      return valueAt(*d.dictionary(), d.GetValueIndex(row));
    }
    default: {  // dates, timestamps, decimals, binary, …: their text
      const auto scalar = array.GetScalar(row);
      return scalar.ok() ? json((*scalar)->ToString()) : json(nullptr);
    }
  }
}

// Where the rows go: the caller's `use`, the report (issues under the path the caller named, a
// folder's rows numbered across its files), the row count so far.
struct RowSink {
  const std::filesystem::path& shown;
  const char* what;
  DatasetReport& report;
  const std::function<std::string(const json&, std::size_t)>& use;
  std::size_t rows = 0;

  void take(const arrow::RecordBatch& batch) {
    for (int64_t r = 0; r < batch.num_rows(); ++r) {
      const std::size_t number = ++rows;
      ++report.lines;
      json row = json::object();
      for (int c = 0; c < batch.num_columns(); ++c)
        row[batch.schema()->field(c)->name()] = valueAt(*batch.column(c), r);
      const std::string problem = use(row, number);
      if (problem.empty()) continue;
      ++report.bad;
      if (report.first_issues.size() < kIssuesKept) report.first_issues.push_back({shown.string(), number, problem});
    }
  }
};

// A batch is checked in full before a value is read: Arrow's IPC readers trust a file's offsets,
// and a malformed file must be an error, not a read past the buffers.
void takeChecked(const arrow::RecordBatch& batch, const std::filesystem::path& path, RowSink& sink) {
  if (const auto status = batch.ValidateFull(); !status.ok()) fail(path, sink.what, status.ToString());
  sink.take(batch);
}

void readBatches(arrow::RecordBatchReader& reader, const std::filesystem::path& path, RowSink& sink) {
  for (;;) {
    std::shared_ptr<arrow::RecordBatch> batch;
    if (const auto status = reader.ReadNext(&batch); !status.ok()) fail(path, sink.what, status.ToString());
    if (!batch) return;
    takeChecked(*batch, path, sink);
  }
}

void readParquet(const std::filesystem::path& path, RowSink& sink) {
  auto file = orFail(arrow::io::ReadableFile::Open(path.string()), path, sink.what);
  // Without pre-buffering, one row group is in memory at a time (Arrow reads them all ahead by
  // default: a 200 MB file held 726 MB).
  parquet::ArrowReaderProperties properties;
  properties.set_pre_buffer(false);
  parquet::arrow::FileReaderBuilder builder;
  if (const auto status = builder.Open(file); !status.ok()) fail(path, sink.what, status.ToString());
  auto reader = orFail(builder.properties(properties)->Build(), path, sink.what);
  auto batches = orFail(reader->GetRecordBatchReader(), path, sink.what);
  readBatches(*batches, path, sink);
}

// An Arrow IPC file (with its footer), else an IPC stream (what `datasets` writes).
void readArrow(const std::filesystem::path& path, RowSink& sink) {
  auto file = orFail(arrow::io::ReadableFile::Open(path.string()), path, sink.what);
  if (auto random = arrow::ipc::RecordBatchFileReader::Open(file); random.ok()) {
    for (int b = 0; b < (*random)->num_record_batches(); ++b)
      takeChecked(*orFail((*random)->ReadRecordBatch(b), path, sink.what), path, sink);
    return;
  }
  if (const auto status = file->Seek(0); !status.ok()) fail(path, sink.what, status.ToString());
  auto stream = orFail(arrow::ipc::RecordBatchStreamReader::Open(file), path, sink.what);
  readBatches(*stream, path, sink);
}

// A `datasets` folder's data files: those its state.json lists, in order. A folder without one
// (the cache's `name-train.arrow` beside `name-test.arrow`) is refused: its files may be several
// splits, and the user names the files instead.
std::vector<std::filesystem::path> folderFiles(const std::filesystem::path& dir, const char* what) {
  std::vector<std::filesystem::path> files;
  if (std::ifstream state(dir / "state.json"); state) {
    const json s = json::parse(state, nullptr, false);
    if (s.is_discarded() || !s.contains("_data_files") || !s["_data_files"].is_array())
      fail(dir, what, "its state.json lists no _data_files");
    for (const auto& f : s["_data_files"]) files.push_back(dir / f.value("filename", ""));
    return files;
  }
  if (std::filesystem::exists(dir / "dataset_dict.json"))
    fail(dir, what,
         "it holds several splits (dataset_dict.json): name a split's folder, e.g. " + (dir / "train").string());
  fail(dir, what, "the folder has no state.json (not a save_to_disk folder); name its .arrow or .parquet files");
}

}  // namespace

bool isTableFile(const std::filesystem::path& path) {
  const auto ext = path.extension();
  return ext == ".parquet" || ext == ".arrow" || std::filesystem::is_directory(path);
}

void readTableRows(const std::filesystem::path& path, const char* what, DatasetReport& report,
                   const std::function<std::string(const json&, std::size_t)>& use) {
  const std::vector<std::filesystem::path> files =
      std::filesystem::is_directory(path) ? folderFiles(path, what) : std::vector<std::filesystem::path>{path};
  RowSink sink{path, what, report, use};
  for (const auto& file : files) {
    if (!std::filesystem::exists(file)) throw Error(fmt::format("{} {}: cannot be read", what, file.string()));
    try {
      if (file.extension() == ".parquet")
        readParquet(file, sink);
      else
        readArrow(file, sink);
    } catch (const parquet::ParquetException& e) {
      fail(file, what, e.what());
    }
  }
}

}  // namespace astraflow::detail
