#pragma once
#include <ATen/autocast_mode.h>
#include <torch/types.h>

namespace astraflow {

// Autocast to bf16 on the trainer's device for one step's forward and backward (matmuls and
// linear layers in bf16, reductions and the loss in float32); the weights stay float32.
class AutocastScope {
 public:
  AutocastScope(bool enabled, const torch::Device& device) : enabled_(enabled), type_(device.type()) {
    if (!enabled_) return;
    was_enabled_ = at::autocast::is_autocast_enabled(type_);
    was_dtype_ = at::autocast::get_autocast_dtype(type_);
    at::autocast::set_autocast_dtype(type_, at::kBFloat16);
    at::autocast::set_autocast_enabled(type_, true);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(type_, was_enabled_);
    at::autocast::set_autocast_dtype(type_, was_dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_;
  at::DeviceType type_;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kBFloat16;
};

}  // namespace astraflow
