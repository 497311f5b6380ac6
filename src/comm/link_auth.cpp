// HMAC-SHA256, nonces and frame tags of the authenticated cross-site link, over OpenSSL 3
// (EVP_MAC, RAND_bytes, CRYPTO_memcmp). What is computed: link_auth.hpp.
#include "comm/link_auth.hpp"

#include <fmt/format.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <bit>
#include <cstring>
#include <string_view>
#include <utility>

#include "astraflow/comm/ucx.hpp"

namespace astraflow::link_auth {

static_assert(std::endian::native == std::endian::little, "the tag inputs are copied in host order");

namespace {

// OpenSSL reports why in its thread's error queue; the first entry names the cause.
[[noreturn]] void throwOpenSsl(const char* call) {
  const unsigned long code = ERR_get_error();
  char text[256] = "no OpenSSL error queued";
  if (code != 0) ERR_error_string_n(code, text, sizeof text);
  ERR_clear_error();
  throw UcxError(0, fmt::format("{}: {} failed: {}", processLocation(), call, text));
}

const unsigned char* bytes(std::span<const std::byte> s) { return reinterpret_cast<const unsigned char*>(s.data()); }

std::span<const std::byte> label(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

std::span<const std::byte> asBytes(const std::uint64_t& v) { return std::as_bytes(std::span(&v, 1)); }

}  // namespace

Nonce freshNonce() {
  Nonce n;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size())) != 1) {
    throwOpenSsl("RAND_bytes");
  }
  return n;
}

void wipe(std::span<std::byte> secret) {
  if (!secret.empty()) OPENSSL_cleanse(secret.data(), secret.size());
}

bool tagsEqual(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// ---- handles --------------------------------------------------------------------------------

EvpMac::EvpMac() : mac_(EVP_MAC_fetch(nullptr, OSSL_MAC_NAME_HMAC, nullptr)) {
  if (mac_ == nullptr) throwOpenSsl("EVP_MAC_fetch(HMAC)");
}

EvpMac::~EvpMac() { EVP_MAC_free(mac_); }

EvpMac::EvpMac(EvpMac&& o) noexcept : mac_(std::exchange(o.mac_, nullptr)) {}

EvpMac& EvpMac::operator=(EvpMac&& o) noexcept {
  if (this != &o) {
    EVP_MAC_free(mac_);
    mac_ = std::exchange(o.mac_, nullptr);
  }
  return *this;
}

EvpMacContext::EvpMacContext(const EvpMac& mac) : ctx_(EVP_MAC_CTX_new(mac.get())) {
  if (ctx_ == nullptr) throwOpenSsl("EVP_MAC_CTX_new");
}

EvpMacContext::~EvpMacContext() { EVP_MAC_CTX_free(ctx_); }

EvpMacContext::EvpMacContext(EvpMacContext&& o) noexcept : ctx_(std::exchange(o.ctx_, nullptr)) {}

EvpMacContext& EvpMacContext::operator=(EvpMacContext&& o) noexcept {
  if (this != &o) {
    EVP_MAC_CTX_free(ctx_);
    ctx_ = std::exchange(o.ctx_, nullptr);
  }
  return *this;
}

// ---- HMAC-SHA256 ------------------------------------------------------------------------------

HmacSha256::HmacSha256(std::span<const std::byte> key) : key_(key.begin(), key.end()), ctx_(mac_) {
  if (key_.empty()) throw UcxError(0, fmt::format("{}: the UCX link key is empty", processLocation()));
  // The digest is set once; compute() only re-keys, which costs two SHA-256 blocks a frame.
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  if (EVP_MAC_CTX_set_params(ctx_.get(), params) != 1) {
    wipeKey();
    throwOpenSsl("EVP_MAC_CTX_set_params(digest SHA256)");
  }
}

HmacSha256::~HmacSha256() { wipeKey(); }

HmacSha256& HmacSha256::operator=(HmacSha256&& o) noexcept {
  if (this != &o) {
    wipeKey();
    key_ = std::move(o.key_);
    o.key_.clear();
    ctx_ = std::move(o.ctx_);
    mac_ = std::move(o.mac_);
  }
  return *this;
}

void HmacSha256::wipeKey() { wipe(key_); }

Tag HmacSha256::compute(std::span<const std::span<const std::byte>> parts) {
  // Keyed afresh each time (EVP_MAC_init with the key), which needs no assumption about what
  // a provider keeps between one final and the next init.
  if (EVP_MAC_init(ctx_.get(), bytes(key_), key_.size(), nullptr) != 1) throwOpenSsl("EVP_MAC_init");
  for (const auto part : parts) {
    if (part.empty()) continue;
    if (EVP_MAC_update(ctx_.get(), bytes(part), part.size()) != 1) throwOpenSsl("EVP_MAC_update");
  }
  Tag tag;
  std::size_t written = 0;
  if (EVP_MAC_final(ctx_.get(), reinterpret_cast<unsigned char*>(tag.data()), &written, tag.size()) != 1) {
    throwOpenSsl("EVP_MAC_final");
  }
  if (written != tag.size()) {
    throw UcxError(0, fmt::format("{}: HMAC-SHA256 gave {} bytes, not {}", processLocation(), written, tag.size()));
  }
  return tag;
}

// ---- handshake ------------------------------------------------------------------------------

Tag serverProof(HmacSha256& link_key, const Transcript& t) {
  return link_key.compute({label("server"), t.client_nonce, t.server_nonce, asBytes(t.client_max_message_bytes),
                           asBytes(t.server_max_message_bytes)});
}

Tag clientProof(HmacSha256& link_key, const Transcript& t) {
  return link_key.compute({label("client"), t.server_nonce, t.client_nonce, asBytes(t.client_max_message_bytes),
                           asBytes(t.server_max_message_bytes)});
}

Tag sessionKey(HmacSha256& link_key, const Transcript& t) {
  return link_key.compute({label("session"), t.client_nonce, t.server_nonce});
}

// ---- frames ---------------------------------------------------------------------------------

FrameAuthenticator::FrameAuthenticator(const Tag& session_key, Role role)
    : mac_(session_key),
      out_(role == Role::Client ? kClientToServer : kServerToClient),
      in_(role == Role::Client ? kServerToClient : kClientToServer) {}

Tag FrameAuthenticator::tagFor(std::uint8_t direction, std::uint64_t sequence, std::uint32_t kind,
                               std::span<const std::byte> payload) {
  // direction u8, sequence u64, then the frame header as it is on the wire (kind u32, length u64).
  std::array<std::byte, 1 + 8 + 4 + 8> head{};
  const std::uint64_t length = payload.size();
  head[0] = static_cast<std::byte>(direction);
  std::memcpy(head.data() + 1, &sequence, 8);
  std::memcpy(head.data() + 9, &kind, 4);
  std::memcpy(head.data() + 13, &length, 8);
  return mac_.compute({head, payload});
}

Tag FrameAuthenticator::seal(std::uint32_t kind, std::span<const std::byte> payload) {
  return tagFor(out_, sent_++, kind, payload);
}

bool FrameAuthenticator::open(std::uint32_t kind, std::span<const std::byte> payload, std::span<const std::byte> tag) {
  if (!tagsEqual(tagFor(in_, received_, kind, payload), tag)) return false;
  ++received_;
  return true;
}

}  // namespace astraflow::link_auth
