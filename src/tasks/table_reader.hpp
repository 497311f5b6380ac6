#pragma once
// Prompt datasets as they come (docs/tasks.md, "Files"): Parquet files, Arrow IPC files and
// streams (`.arrow`, what Hugging Face `datasets` writes), and a `datasets` folder
// (`save_to_disk`: its state.json's data files in order), read with Apache Arrow's C++ libraries
// a record batch at a time, each row handed on as a JSON object the way JSONL rows are. Private
// to src/tasks; Arrow's headers stay in table_reader.cpp.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "astraflow/tasks/prompt_dataset.hpp"

namespace astraflow::detail {

// Whether `path` is read as a table (a `.parquet` or `.arrow` file, or a folder) rather than JSONL.
bool isTableFile(const std::filesystem::path& path);

// Hands each row to `use(row, row_number)` (numbers from 1 across a folder's files), which returns
// "" when it took the row, else what is wrong with it; such rows are counted in `report` with
// the path and row number. A column's value in a row: null, a boolean, a number, a string, a list
// or an object (a struct; a map with its keys as text); a NaN and bytes are null; other types are
// their text. Each batch is validated in full before it is read (a malformed file is an error).
// Throws Error naming the path when it cannot be opened or read as a table.
void readTableRows(const std::filesystem::path& path, const char* what, DatasetReport& report,
                   const std::function<std::string(const nlohmann::ordered_json&, std::size_t)>& use);

}  // namespace astraflow::detail
