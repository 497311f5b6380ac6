// Safetensors checkpoints: one model.safetensors, or shards listed by
// model.safetensors.index.json (the layout transformers' save_pretrained writes).
#include <fmt/format.h>

#include <algorithm>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "astraflow/io/safetensors.hpp"

namespace astraflow::io {

namespace {

using nlohmann::json;

constexpr const char* kSingle = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

json readIndex(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("safetensors index {}: cannot open", path.string()));
  std::stringstream text;
  text << in.rdbuf();
  try {
    json index = json::parse(text.str());
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      throw Error(fmt::format("safetensors index {}: no \"weight_map\" object", path.string()));
    }
    return index;
  } catch (const json::parse_error& e) {
    throw Error(fmt::format("safetensors index {}: not valid JSON: {}", path.string(), e.what()));
  }
}

}  // namespace

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::filesystem::path& folder_or_file) {
  SafetensorsCheckpoint c;
  const bool folder = std::filesystem::is_directory(folder_or_file);
  const auto index_path = folder_or_file / kIndex;
  if (!folder) {
    c.files_.push_back(SafetensorsFile::open(folder_or_file));
  } else if (std::filesystem::exists(index_path)) {
    const json index = readIndex(index_path);
    // Shards in the order the index first names them; every tensor where the index says.
    std::vector<std::string> shard_names;
    std::map<std::string, std::string> shard_of;
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) {
        throw Error(
            fmt::format("safetensors index {}: weight_map['{}'] is not a file name", index_path.string(), tensor));
      }
      const std::string s = shard.get<std::string>();
      if (s.find('/') != std::string::npos || s == ".." || s.empty()) {
        throw Error(fmt::format("safetensors index {}: weight_map['{}'] names '{}', not a file beside the index",
                                index_path.string(), tensor, s));
      }
      shard_of[tensor] = s;
      if (std::find(shard_names.begin(), shard_names.end(), s) == shard_names.end()) shard_names.push_back(s);
    }
    for (const auto& s : shard_names) c.files_.push_back(SafetensorsFile::open(folder_or_file / s));
    for (std::size_t i = 0; i < c.files_.size(); ++i) {
      for (const auto& t : c.files_[i].tensors()) {
        auto it = shard_of.find(t.name);
        if (it == shard_of.end()) {
          throw Error(fmt::format("safetensors {}: tensor '{}' is not in the index {}",
                                  (folder_or_file / shard_names[i]).string(), t.name, index_path.string()));
        }
        if (it->second != shard_names[i]) {
          throw Error(fmt::format("safetensors {}: tensor '{}' is there, but the index puts it in {}",
                                  (folder_or_file / shard_names[i]).string(), t.name, it->second));
        }
      }
    }
    for (const auto& [tensor, shard] : shard_of) {
      const auto at = std::find(shard_names.begin(), shard_names.end(), shard) - shard_names.begin();
      if (!c.files_[static_cast<std::size_t>(at)].find(tensor)) {
        throw Error(fmt::format("safetensors {}: the index {} lists tensor '{}' here, the file lacks it",
                                (folder_or_file / shard).string(), index_path.string(), tensor));
      }
    }
  } else if (std::filesystem::exists(folder_or_file / kSingle)) {
    c.files_.push_back(SafetensorsFile::open(folder_or_file / kSingle));
  } else {
    throw Error(
        fmt::format("safetensors checkpoint {}: neither {} nor {} is there", folder_or_file.string(), kSingle, kIndex));
  }
  for (const auto& f : c.files_) {
    for (const auto& t : f.tensors()) {
      if (!c.by_name_.emplace(t.name, &t).second) {
        throw Error(
            fmt::format("safetensors checkpoint {}: tensor '{}' is in two files", folder_or_file.string(), t.name));
      }
      c.tensors_.push_back(&t);
    }
  }
  return c;
}

void SafetensorsCheckpoint::releasePages(const StTensorView& tensor) const {
  for (const auto& file : files_) file.releasePages(tensor);
}

const StTensorView* SafetensorsCheckpoint::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

namespace {

std::uint64_t bytesOf(const StTensorView& t) { return t.bytes.size(); }
std::uint64_t bytesOf(const StTensorSource& t) {
  std::uint64_t n = dtypeBytes(t.dtype);
  for (const auto d : t.shape) n *= static_cast<std::uint64_t>(std::max<std::int64_t>(d, 0));
  return n;
}

// Views and sources alike: the shards are planned from the byte counts, then each is written.
template <class Tensor>
std::vector<std::filesystem::path> writeCheckpointOf(const std::filesystem::path& folder,
                                                     const std::vector<Tensor>& tensors, std::uint64_t max_shard_bytes,
                                                     const StMetadata& metadata) {
  std::filesystem::create_directories(folder);
  // Consecutive tensors fill a shard up to max_shard_bytes (a larger tensor gets one alone).
  std::vector<std::vector<Tensor>> shards(1);
  std::uint64_t in_shard = 0, total = 0;
  for (const auto& t : tensors) {
    if (!shards.back().empty() && in_shard + bytesOf(t) > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(t);
    in_shard += bytesOf(t);
    total += bytesOf(t);
  }
  std::vector<std::filesystem::path> written;
  if (shards.size() == 1) {
    writeSafetensors(folder / kSingle, shards.front(), metadata);
    std::filesystem::remove(folder / kIndex);  // a stale index would shadow the single file
    written.push_back(folder / kSingle);
    return written;
  }
  json weight_map = json::object();
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    writeSafetensors(folder / name, shards[i], metadata);
    for (const auto& t : shards[i]) weight_map[t.name] = name;
    written.push_back(folder / name);
  }
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const auto tmp = folder / (std::string(kIndex) + ".tmp");
  {
    std::ofstream out(tmp);
    out << index.dump(2) << "\n";
    if (!out) throw Error(fmt::format("safetensors index {}: write failed", tmp.string()));
  }
  std::filesystem::rename(tmp, folder / kIndex);
  std::filesystem::remove(folder / kSingle);
  written.push_back(folder / kIndex);
  return written;
}

}  // namespace

std::vector<std::filesystem::path> writeSafetensorsCheckpoint(const std::filesystem::path& folder,
                                                              const std::vector<StTensorView>& tensors,
                                                              std::uint64_t max_shard_bytes,
                                                              const StMetadata& metadata) {
  return writeCheckpointOf(folder, tensors, max_shard_bytes, metadata);
}

std::vector<std::filesystem::path> writeSafetensorsCheckpoint(const std::filesystem::path& folder,
                                                              const std::vector<StTensorSource>& tensors,
                                                              std::uint64_t max_shard_bytes,
                                                              const StMetadata& metadata) {
  return writeCheckpointOf(folder, tensors, max_shard_bytes, metadata);
}

}  // namespace astraflow::io
