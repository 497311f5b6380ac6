// readJsonFile: a tokenizer folder's JSON file (tokenizer.json, tokenizer_config.json) parsed, with an Error naming
// the file when it cannot be read or is not JSON.
#include "text/json_file.hpp"

#include <fmt/format.h>

#include <fstream>

#include "astraflow/core/error.hpp"

namespace astraflow::text {

nlohmann::json readJsonFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot be read", path.string()));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON ({})", path.string(), e.what()));
  }
}

}  // namespace astraflow::text
