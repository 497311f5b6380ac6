#pragma once
// The byte layout of a node's shared weight copy (NodeWeights' header, slots and members), in
// one place because two readers use it: the node's own ranks through the shared memory, and
// the child nodes' writers through the relay window (NodeRelay).
#include <cstdint>

namespace astraflow::node_layout {

constexpr std::uint64_t kNone = ~std::uint64_t{0};
constexpr std::uint64_t kCurrent = 0, kWriter = 8, kCurrentVersion = 16, kDataOffset = 24;
constexpr std::uint64_t kSlots = 64, kSlotRecordBytes = 32, kMaxSlots = 2;
// Per slot, a full version on its way in: version (−1: none), checksum, bytes, bytes in place.
constexpr std::uint64_t kProgress = 128, kProgressBytes = 32;
constexpr std::uint64_t kHeaderEnd = kProgress + kProgressBytes * kMaxSlots;  // what a relay reads
constexpr std::uint64_t kMembers = 256, kMemberBytes = 16;
constexpr std::uint64_t kPage = 4096;

constexpr std::uint64_t pageAligned(std::uint64_t n) { return (n + kPage - 1) / kPage * kPage; }

}  // namespace astraflow::node_layout
