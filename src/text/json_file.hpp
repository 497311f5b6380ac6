#pragma once
// Reading the JSON files of tokenizer folders (tokenizer.json, tokenizer_config.json).
#include <filesystem>
#include <nlohmann/json.hpp>

namespace astraflow::text {

// Throws Error naming the file when it cannot be read or is not valid JSON.
nlohmann::json readJsonFile(const std::filesystem::path& path);

}  // namespace astraflow::text
