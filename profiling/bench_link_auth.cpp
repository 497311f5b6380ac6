// bench_link_auth [MiB=256] [reps=5]: what authenticating the cross-site link costs
// (src/comm/link_auth.hpp). Side by side in one run: memcpy of a payload of that size, one
// HMAC-SHA256 over it in place (the tag a sender computes before a frame leaves, and a receiver
// before it hands the frame on), and a FrameAuthenticator seal + open of it (both ends of one
// frame); then the fixed cost per frame on a 64-byte payload (re-keying: two SHA-256 blocks).
// Prints best-of-reps seconds and GB/s. Single process, no MPI, no UCX.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "comm/link_auth.hpp"

using namespace astraflow;

using bench::best;

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::size_t bytes = mib << 20;
  std::vector<std::byte> payload(bytes), copy(bytes);
  for (std::size_t i = 0; i < bytes; ++i) payload[i] = static_cast<std::byte>((i * 2654435761u) >> 13);

  const std::string key = "bench-link-key";
  link_auth::HmacSha256 mac(std::as_bytes(std::span(key.data(), key.size())));
  const link_auth::Tag session = link_auth::freshNonce();
  link_auth::FrameAuthenticator sender(session, link_auth::FrameAuthenticator::Role::Client);
  link_auth::FrameAuthenticator receiver(session, link_auth::FrameAuthenticator::Role::Server);

  volatile unsigned char sink = 0;
  const double t_copy = best(reps, [&] {
    std::memcpy(copy.data(), payload.data(), bytes);
    sink = sink + static_cast<unsigned char>(copy[bytes / 2]);
  });
  const double t_hmac = best(reps, [&] {
    const link_auth::Tag t = mac.compute({payload});
    sink = sink + static_cast<unsigned char>(t[0]);
  });
  bool all_opened = true;
  const double t_frame = best(reps, [&] {
    const link_auth::Tag t = sender.seal(9, payload);
    all_opened = receiver.open(9, payload, t) && all_opened;
  });
  constexpr int kSmallFrames = 100000;
  const std::vector<std::byte> small(64, std::byte{7});
  const double t_small = best(reps, [&] {
    for (int i = 0; i < kSmallFrames; ++i) {
      const link_auth::Tag t = sender.seal(1, small);
      sink = sink + static_cast<unsigned char>(t[0]);
    }
  });

  const double gb = static_cast<double>(bytes) / 1e9;
  std::printf("payload %zu MiB, best of %d\n", mib, reps);
  std::printf("%-34s %9.4f s %8.2f GB/s\n", "memcpy", t_copy, gb / t_copy);
  std::printf("%-34s %9.4f s %8.2f GB/s  (%.2fx memcpy time)\n", "HMAC-SHA256 in place", t_hmac, gb / t_hmac,
              t_hmac / t_copy);
  std::printf("%-34s %9.4f s %8.2f GB/s  (both ends of one frame)\n", "frame seal + open", t_frame, gb / t_frame);
  std::printf("%-34s %9.2f us per frame\n", "seal of a 64-byte frame", t_small / kSmallFrames * 1e6);
  if (!all_opened) {
    std::printf("FAILED: a sealed frame did not open\n");
    return 1;
  }
  return 0;
}
