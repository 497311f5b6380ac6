#pragma once
// The weight store's window layout (weight_store.hpp has the map), shared by the host's side
// (weight_store.cpp) and the readers' (weight_store_pull.cpp).
#include <cstdint>

#include "astraflow/weights/weight_store.hpp"

namespace astraflow::store_window {

constexpr std::uint64_t kSeq = 0, kPubVersion = 8, kPubBytes = 16, kPubHash = 24;
constexpr std::uint64_t kStagedState = 32, kStagedVersion = 40, kStagedBytes = 48;
constexpr std::uint64_t kStagedWait = 56, kStagedStep = 64;  // the trainer's cumulative seconds (f64 bits)
constexpr std::uint64_t kLogTable = 128, kLogEntryBytes = 24;
constexpr std::uint64_t kHeaderBytes = 2048;
static_assert(kLogTable + kLogEntryBytes * WeightStore::kMaxDeltaLog <= kHeaderBytes);

}  // namespace astraflow::store_window
