// ServedWeights: weight versions materialised as Hugging Face folders for an external server, written once per node
// under a lock file, renamed into place whole and stamped with the blob's hash; old versions collected.
#include "rollout/served_weights.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include "astraflow/core/error.hpp"
#include "astraflow/model/weight_blob.hpp"
#include "astraflow/rollout/hf_folder.hpp"

namespace astraflow::rollout_detail {

namespace fs = std::filesystem;

ServedWeights::ServedWeights(const fs::path& weights_dir, const std::string& policy, PolicyModel cpu_model, int keep,
                             HfHead head)
    : dir_(weights_dir / policy), model_(std::move(cpu_model)), keep_(std::max(1, keep)), head_(head) {
  fs::create_directories(dir_);
}

namespace {

const char* const kStamp = "astraflow_version.json";

std::string stampText(std::int64_t version, std::uint64_t hash) {
  return fmt::format("{{\"version\": {}, \"weights_xxh3\": {}}}\n", version, hash);
}

// The folder is complete and holds these bits: its stamp (written last, before the rename) says so.
bool holds(const fs::path& folder, std::int64_t version, std::uint64_t hash) {
  std::ifstream in(folder / kStamp);
  if (!in) return false;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text == stampText(version, hash);
}

}  // namespace

fs::path ServedWeights::materialise(std::span<const std::byte> blob, std::int64_t version, std::uint64_t hash) {
  const fs::path target = dir_ / fmt::format("v{}", version);
  if (holds(target, version, hash)) return target;
  const fs::path lock = dir_ / fmt::format("v{}.lock", version);
  const int fd = ::open(lock.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
  if (fd < 0) {
    // Another rank of this node writes it: wait for the rename (a lock older than a minute is a
    // writer that died, and this rank writes the version itself).
    const auto start = std::chrono::steady_clock::now();
    while (!holds(target, version, hash)) {
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) {
        spdlog::warn("{} held for a minute without the version appearing; writing it here", lock.string());
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (holds(target, version, hash)) return target;
  }
  const fs::path tmp = dir_ / fmt::format(".v{}.tmp-{}", version, ::getpid());
  fs::remove_all(tmp);
  // A bf16 CPU model views the blob (its parameters are the node's bytes while they are bound):
  // the folder is written from the store's bits with no copy of the model.
  if (canViewWeights(*model_))
    viewWeights(blob, *model_);
  else
    unpackWeights(blob, *model_);
  writeHfFolder(*model_, model_->config(), tmp, /*bf16=*/true, 5'000'000'000, head_);
  {
    std::ofstream stamp(tmp / kStamp);
    stamp << stampText(version, hash);
    if (!stamp) throw Error(fmt::format("{} cannot be written", (tmp / kStamp).string()));
  }
  std::error_code ec;
  if (fs::exists(target) && !holds(target, version, hash)) fs::remove_all(target, ec);  // another run's
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove_all(tmp);  // another writer won the race: its folder holds the same bytes
    if (!holds(target, version, hash))
      throw Error(fmt::format("cannot move {} into place as {}: {}", tmp.string(), target.string(), ec.message()));
  } else {
    ++written_;
  }
  if (fd >= 0) {
    ::close(fd);
    fs::remove(lock, ec);
  }
  return target;
}

fs::path ServedWeights::pinned(const fs::path& folder) {
  if (!pinned_.empty()) return pinned_;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const fs::path target = dir_ / fmt::format("launch-{}-{}", host, ::getpid());
  const fs::path tmp = dir_ / fmt::format(".launch-{}-{}.tmp", host, ::getpid());
  fs::remove_all(tmp);
  fs::remove_all(target);
  fs::create_directories(tmp);
  for (const auto& e : fs::directory_iterator(folder)) {
    if (!e.is_regular_file()) continue;
    std::error_code ec;
    fs::create_hard_link(e.path(), tmp / e.path().filename(), ec);
    if (ec) fs::copy_file(e.path(), tmp / e.path().filename());
  }
  fs::rename(tmp, target);
  pinned_ = target;
  return pinned_;
}

void ServedWeights::collect(std::int64_t current) {
  std::vector<std::int64_t> versions;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 2 || name[0] != 'v' || !e.is_directory()) continue;
    try {
      std::size_t used = 0;
      const auto v = std::stoll(name.substr(1), &used);
      if (used == name.size() - 1) versions.push_back(v);
    } catch (const std::exception&) {
    }
  }
  // Only versions up to this rank's own count: a higher number is a version another rank of
  // this run reached first, or another run's folder (replaced when this run gets there).
  versions.erase(std::remove_if(versions.begin(), versions.end(), [&](std::int64_t v) { return v > current; }),
                 versions.end());
  std::sort(versions.rbegin(), versions.rend());
  for (std::size_t i = static_cast<std::size_t>(keep_); i < versions.size(); ++i) {
    fs::remove_all(dir_ / fmt::format("v{}", versions[i]), ec);
  }
}

}  // namespace astraflow::rollout_detail
