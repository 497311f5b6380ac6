#include "astraflow/core/model_config.hpp"

#include <charconv>

namespace astraflow {

std::string DeviceRequest::text() const {
  if (kind == DeviceKind::Cpu) return "cpu";
  return index < 0 ? "cuda" : "cuda:" + std::to_string(index);
}

bool parseDeviceRequest(const std::string& text, DeviceRequest& out) {
  if (text == "cpu") {
    out = {DeviceKind::Cpu, -1};
    return true;
  }
  if (text == "cuda") {
    out = {DeviceKind::Cuda, -1};
    return true;
  }
  constexpr std::string_view prefix = "cuda:";
  if (text.size() <= prefix.size() || text.compare(0, prefix.size(), prefix) != 0) return false;
  int index = -1;
  const char* first = text.data() + prefix.size();
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(first, last, index);
  if (ec != std::errc() || end != last || index < 0 || index > 1023) return false;
  out = {DeviceKind::Cuda, index};
  return true;
}

}  // namespace astraflow
