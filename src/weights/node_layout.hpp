#pragma once
// The byte layout of a node's shared weight copy (NodeWeights' header, slots, delta ring and
// members), in one place because two readers use it: the node's own ranks through the shared
// memory, and the child nodes' writers through the relay window (NodeRelay).
#include <cstdint>

namespace astraflow::node_layout {

constexpr std::uint64_t kNone = ~std::uint64_t{0};
constexpr std::uint64_t kCurrent = 0, kWriter = 8, kCurrentVersion = 16, kDataOffset = 24;
// The deltas the node's writers applied, kept for the child nodes (a node with children in
// delta mode; ring bytes 0 elsewhere): where the ring starts (bytes from the start of the
// segment), its bytes, its write position, and a sequence word (odd while a delta is written).
constexpr std::uint64_t kDeltaRing = 32, kDeltaRingBytes = 40, kDeltaHead = 48, kDeltaSeq = 56;
constexpr std::uint64_t kSlots = 64, kSlotRecordBytes = 32, kMaxSlots = 2;
// Per slot, a full version on its way in: version (−1: none), checksum, bytes, bytes in place.
constexpr std::uint64_t kProgress = 128, kProgressBytes = 32;
// The delta ring's table: entry i holds the delta to a version ≡ i (mod kDeltaEntries):
// version (−1: none), offset in the ring, bytes.
constexpr std::uint64_t kDeltaTable = kProgress + kProgressBytes * kMaxSlots, kDeltaEntryBytes = 24, kDeltaEntries = 8;
// The newest delta the node's writers applied, kept or not (one larger than the ring is not):
// a child stops waiting for a delta the ring will never hold.
constexpr std::uint64_t kDeltaNewest = kDeltaTable + kDeltaEntryBytes * kDeltaEntries;
constexpr std::uint64_t kHeaderEnd = kDeltaNewest + 8;  // what a relay reads
constexpr std::uint64_t kMembers = 512, kMemberBytes = 16;
constexpr std::uint64_t kPage = 4096;
static_assert(kHeaderEnd <= kMembers);

constexpr std::uint64_t pageAligned(std::uint64_t n) { return (n + kPage - 1) / kPage * kPage; }

}  // namespace astraflow::node_layout
