#pragma once
// The checks every part of a tokenizer.json is read with: each failure names the file, the part
// and what is wrong, so a file is refused by name and never encoded approximately.
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "astraflow/core/error.hpp"

namespace astraflow::text {

class JsonReader {
 public:
  explicit JsonReader(std::filesystem::path file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw Error(fmt::format("{}: {}: {}", file_.string(), where, what));
  }
  [[noreturn]] void unsupported(const std::string& where, const std::string& type, const char* supported) const {
    fail(where, fmt::format("type '{}' is not supported (supported: {})", type, supported));
  }
  std::string typeOf(const nlohmann::json& j, const std::string& where) const {
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) fail(where, "has no \"type\" string");
    return j["type"].get<std::string>();
  }
  bool flag(const nlohmann::json& j, const char* key, bool fallback) const {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_boolean()) fail(key, "is not true or false");
    return j[key].get<bool>();
  }
  std::string string(const nlohmann::json& j, const char* key, const std::string& where) const {
    if (!j.contains(key) || !j[key].is_string()) fail(where, fmt::format("has no \"{}\" string", key));
    return j[key].get<std::string>();
  }
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
};

}  // namespace astraflow::text
