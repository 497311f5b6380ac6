#pragma once
// Scoped changes to autocast's thread-local state, undone when the scope ends (thrown through or
// not): the block recomputations of activation checkpointing and parameter sharding.
#include <ATen/autocast_mode.h>

namespace astraflow {

// Autocast on `type` as the forward had it (the backward runs outside the forward's scope).
class AutocastAs {
 public:
  AutocastAs(at::DeviceType type, bool enabled, at::ScalarType dtype)
      : type_(type),
        was_enabled_(at::autocast::is_autocast_enabled(type)),
        was_dtype_(at::autocast::get_autocast_dtype(type)) {
    at::autocast::set_autocast_enabled(type_, enabled);
    at::autocast::set_autocast_dtype(type_, dtype);
  }
  ~AutocastAs() {
    at::autocast::set_autocast_enabled(type_, was_enabled_);
    at::autocast::set_autocast_dtype(type_, was_dtype_);
  }
  AutocastAs(const AutocastAs&) = delete;
  AutocastAs& operator=(const AutocastAs&) = delete;

 private:
  at::DeviceType type_;
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

// No caching of the bf16 casts of weights. The cache (keyed by the weight's TensorImpl) lives
// until the autocast scope ends, after the step: for a sharded block it would keep a bf16 copy
// of every block's gathered weights alive, a whole bf16 model per rank.
class NoCastCache {
 public:
  NoCastCache() : was_(at::autocast::is_autocast_cache_enabled()) { at::autocast::set_autocast_cache_enabled(false); }
  ~NoCastCache() { at::autocast::set_autocast_cache_enabled(was_); }
  NoCastCache(const NoCastCache&) = delete;
  NoCastCache& operator=(const NoCastCache&) = delete;

 private:
  bool was_;
};

}  // namespace astraflow
