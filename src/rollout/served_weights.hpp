#pragma once
// Weight versions as folders an external server loads (docs/rollout-backends.md, "Weight
// updates"): <weights_dir>/<policy>/v<V>. A version is written once however many ranks of a node
// ask for it — the first takes a lock file, the others wait for the folder — into a temporary
// name renamed into place whole, so a server never reads half a version; folders older than the
// newest `keep` are removed. Private to src/rollout.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "astraflow/model/hf_weights.hpp"
#include "astraflow/model/policy_model.hpp"

namespace astraflow::rollout_detail {

class ServedWeights {
 public:
  // `head`: how a tied model's output head is written (HfHead::Separate for vLLM's in-place reload).
  ServedWeights(const std::filesystem::path& weights_dir, const std::string& policy, PolicyModel cpu_model, int keep,
                HfHead head = HfHead::AsModel);
  // The folder of `version`, written from the bf16 `blob` unless it is there already with the
  // same bits (`hash`, the store's XXH3 of the blob, kept in the folder's astraflow_version.json:
  // a folder another run left under the same name is replaced, never loaded).
  std::filesystem::path materialise(std::span<const std::byte> blob, std::int64_t version, std::uint64_t hash);
  // Removes the folders of versions up to `current` but the newest `keep` of them (a rank that
  // lags further behind and asks its server for a removed one is refused, counted, and stays on
  // the version it has).
  void collect(std::int64_t current);
  std::uint64_t written() const { return written_; }
  // A launched server's start folder: `folder` (a version's) linked file by file (hard links; a
  // copy where the filesystem has none) under a name collect() never removes, once per process —
  // a server starting again later, or still reading its start folder while the run moves on, must
  // not find it collected. It starts from these weights and then loads the version its rank holds.
  std::filesystem::path pinned(const std::filesystem::path& folder);

 private:
  std::filesystem::path dir_;
  PolicyModel model_;  // views the blob (bf16 on the CPU; else it is unpacked here), written out as bf16 bit for bit
  int keep_;
  HfHead head_;
  std::uint64_t written_ = 0;
  std::filesystem::path pinned_;
};

}  // namespace astraflow::rollout_detail
