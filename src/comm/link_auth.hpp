#pragma once
// The cryptography of the authenticated cross-site link (docs/cross-site.md, "The authenticated
// link"): HMAC-SHA256 through OpenSSL 3's EVP_MAC API, fresh nonces, the two handshake proofs,
// the per-connection session key, and the tag every frame carries after the handshake. Private
// to src/comm. OpenSSL's handle types are only forward-declared, so the UCX files and the tests
// that include this need none of OpenSSL's headers.
//
// What is computed (every integer little-endian, every field of fixed size, so no two inputs of
// one label can be confused):
//   server proof  = HMAC(key, "server"  || client nonce || server nonce || client max u64 || server max u64)
//   client proof  = HMAC(key, "client"  || server nonce || client nonce || client max u64 || server max u64)
//   session key   = HMAC(key, "session" || client nonce || server nonce)
//   frame tag     = HMAC(session key, direction u8 || sequence u64 || kind u32 || length u64 || payload)
// `key` is the link's shared token, as bytes; it is never sent and never logged.
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

struct evp_mac_st;      // OpenSSL's EVP_MAC
struct evp_mac_ctx_st;  // OpenSSL's EVP_MAC_CTX

namespace astraflow::link_auth {

inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kTagBytes = 32;  // one HMAC-SHA256 output
using Nonce = std::array<std::byte, kNonceBytes>;
using Tag = std::array<std::byte, kTagBytes>;

// 32 bytes from OpenSSL's CSPRNG (RAND_bytes). Throws UcxError when it has no entropy.
Nonce freshNonce();

// Overwrites secret bytes (a session key on its way into a FrameAuthenticator) so that the
// compiler cannot drop the write (OPENSSL_cleanse).
void wipe(std::span<std::byte> secret);

// Equality that takes the same time wherever the first difference is (CRYPTO_memcmp), so that
// timing a guess tells nothing about how much of it matched. Different sizes: false.
bool tagsEqual(std::span<const std::byte> a, std::span<const std::byte> b);

// Owns one EVP_MAC: OpenSSL's HMAC implementation, fetched from the default provider.
class EvpMac {
 public:
  EvpMac();
  ~EvpMac();
  EvpMac(EvpMac&& o) noexcept;
  EvpMac& operator=(EvpMac&& o) noexcept;
  EvpMac(const EvpMac&) = delete;
  EvpMac& operator=(const EvpMac&) = delete;
  evp_mac_st* get() const { return mac_; }

 private:
  evp_mac_st* mac_ = nullptr;
};

// Owns one EVP_MAC_CTX of an EvpMac (the context holds its own reference to the EVP_MAC).
class EvpMacContext {
 public:
  explicit EvpMacContext(const EvpMac& mac);
  ~EvpMacContext();
  EvpMacContext(EvpMacContext&& o) noexcept;
  EvpMacContext& operator=(EvpMacContext&& o) noexcept;
  EvpMacContext(const EvpMacContext&) = delete;
  EvpMacContext& operator=(const EvpMacContext&) = delete;
  evp_mac_ctx_st* get() const { return ctx_; }

 private:
  evp_mac_ctx_st* ctx_ = nullptr;
};

// HMAC-SHA256 under one key. compute() reads its parts where they lie (a 256 MiB weight update
// is hashed in place, never copied). Keeps a copy of the key, wiped when destroyed.
class HmacSha256 {
 public:
  // Throws UcxError for an empty key (anyone could compute its tags) or when OpenSSL fails.
  explicit HmacSha256(std::span<const std::byte> key);
  ~HmacSha256();
  HmacSha256(HmacSha256&& o) noexcept = default;  // the moved-from key is empty: nothing left to wipe
  HmacSha256& operator=(HmacSha256&& o) noexcept;
  HmacSha256(const HmacSha256&) = delete;
  HmacSha256& operator=(const HmacSha256&) = delete;

  // The tag of the concatenation of `parts`.
  Tag compute(std::span<const std::span<const std::byte>> parts);
  Tag compute(std::initializer_list<std::span<const std::byte>> parts) {
    return compute(std::span<const std::span<const std::byte>>(parts.begin(), parts.size()));
  }

 private:
  void wipeKey();

  std::vector<std::byte> key_;
  EvpMac mac_;
  EvpMacContext ctx_;
};

// What the handshake proofs bind: both nonces and the largest frame each side announced, so that
// nobody between the peers can alter a limit unnoticed.
struct Transcript {
  Nonce client_nonce{};
  Nonce server_nonce{};
  std::uint64_t client_max_message_bytes = 0;
  std::uint64_t server_max_message_bytes = 0;
};

Tag serverProof(HmacSha256& link_key, const Transcript& t);
Tag clientProof(HmacSha256& link_key, const Transcript& t);
Tag sessionKey(HmacSha256& link_key, const Transcript& t);

// The tags of one connection's frames after its handshake: each direction has its own sequence
// counter from 0, so a frame replayed, dropped, reordered or reflected back to its sender gets a
// tag for another (direction, sequence) and does not verify; neither does one with any bit of
// its header or payload changed, or one made without the session key.
class FrameAuthenticator {
 public:
  enum class Role { Client, Server };
  // Direction bytes in the tag's input.
  static constexpr std::uint8_t kClientToServer = 0x43;  // 'C'
  static constexpr std::uint8_t kServerToClient = 0x53;  // 'S'

  FrameAuthenticator(const Tag& session_key, Role role);

  // The tag of the next frame this side sends; the send sequence moves on.
  Tag seal(std::uint32_t kind, std::span<const std::byte> payload);
  // Whether `tag` is that of the next frame from the peer; the receive sequence moves on only
  // when it is.
  bool open(std::uint32_t kind, std::span<const std::byte> payload, std::span<const std::byte> tag);

  std::uint64_t framesSealed() const { return sent_; }
  std::uint64_t framesOpened() const { return received_; }

 private:
  Tag tagFor(std::uint8_t direction, std::uint64_t sequence, std::uint32_t kind, std::span<const std::byte> payload);

  HmacSha256 mac_;
  std::uint8_t out_, in_;
  std::uint64_t sent_ = 0, received_ = 0;
};

}  // namespace astraflow::link_auth
