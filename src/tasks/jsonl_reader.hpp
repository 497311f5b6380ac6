#pragma once
// The JSONL line loop the prompt datasets and the BM25 corpus share: each non-blank line
// (CRLF accepted) parsed as JSON and handed to the caller, which says why a line cannot be
// used; such lines and lines that are not JSON are counted in the report with file and line.
// Private to src/tasks.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/prompt_dataset.hpp"

namespace astraflow::detail {

inline constexpr std::size_t kIssuesKept = 20;  // bad lines reported with file and line

// `use(json, line_number)` returns "" when it took the line, else what is wrong with it.
// Throws Error ("<what> <file>: cannot be read") when the file cannot be opened.
template <class Use>
void readJsonLines(const std::filesystem::path& file, const char* what, DatasetReport& report, Use use) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(fmt::format("{} {}: cannot be read", what, file.string()));
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    ++report.lines;
    std::string problem;
    try {
      problem = use(nlohmann::ordered_json::parse(line), number);
    } catch (const nlohmann::ordered_json::exception& e) {
      problem = fmt::format("not valid JSON ({})", e.what());
    }
    if (problem.empty()) continue;
    ++report.bad;
    if (report.first_issues.size() < kIssuesKept) report.first_issues.push_back({file.string(), number, problem});
  }
}

}  // namespace astraflow::detail
