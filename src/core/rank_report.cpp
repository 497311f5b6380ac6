// encodeRankReport / decodeRankReport: a rank's end-of-run report in the byte format, written and read by walking
// each struct's fields() list (Put, Get); also RolloutReport::countRewardReason.
#include "astraflow/core/rank_report.hpp"

#include <fmt/format.h>

#include <type_traits>

#include "astraflow/core/byte_io.hpp"
#include "astraflow/core/error.hpp"

namespace astraflow {

namespace {

constexpr std::uint16_t kRankReportFormat = 9;

// Writes a struct's fields in their listed order.
struct Put {
  ByteWriter& w;

  template <class T>
  void operator()(const char*, const T& x) const {
    if constexpr (std::is_same_v<T, bool>) {
      w.put<std::uint8_t>(x ? 1 : 0);
    } else if constexpr (ByteScalar<T>) {
      w.put(x);
    } else if constexpr (std::is_same_v<T, std::string>) {
      w.putString(x);
    } else if constexpr (IsReportList<T>::value) {
      w.put(static_cast<std::uint32_t>(x.size()));
      for (const auto& e : x) T::value_type::fields(e, *this);
    } else {
      static_assert(IsReportOptional<T>::value, "a report field is a scalar, bool, string, vector or optional");
      w.put<std::uint8_t>(x ? 1 : 0);
      if (x) T::value_type::fields(*x, *this);
    }
  }
};

// The encoded size of a default element: the least bytes one list item can take, which bounds
// a list's count by the bytes left before anything is allocated.
template <class T>
std::size_t leastBytes() {
  ByteWriter w;
  const T empty{};
  T::fields(empty, Put{w});
  return w.size();
}

// Reads them back; after the first error it reads nothing more (the reader keeps the message).
struct Get {
  ByteReader& r;

  template <class T>
  void operator()(const char* field, T& x) const {
    if (r.failed()) return;
    if constexpr (std::is_same_v<T, bool>) {
      std::uint8_t b = 0;
      if (r.get(b, field) && b > 1) r.fail(fmt::format("rank report: {} is {}, not a bool (0 or 1)", field, b));
      x = b == 1;
    } else if constexpr (ByteScalar<T>) {
      r.get(x, field);
    } else if constexpr (std::is_same_v<T, std::string>) {
      r.getString(x, field);
    } else if constexpr (IsReportList<T>::value) {
      std::uint32_t n = 0;
      if (!r.getCount(n, leastBytes<typename T::value_type>(), field)) return;
      x.resize(n);
      for (auto& e : x) T::value_type::fields(e, *this);
    } else {
      std::uint8_t present = 0;
      if (!r.get(present, field)) return;
      if (present > 1) {
        r.fail(fmt::format("rank report: {} has presence flag {} (0 or 1)", field, present));
        return;
      }
      x.reset();
      if (present == 1) T::value_type::fields(x.emplace(), *this);
    }
  }
};

template <std::size_t I = 0>
void emplaceAlternative(RoleReport& figures, std::size_t index) {
  if constexpr (I < std::variant_size_v<RoleReport>) {
    if (index == I) {
      figures.emplace<I>();
    } else {
      emplaceAlternative<I + 1>(figures, index);
    }
  }
}

}  // namespace

void RolloutReport::countRewardReason(std::string_view reason) {
  if (reason.empty())
    ++reward_unstated;
  else if (reason == "correct")
    ++reward_correct;
  else if (reason == "wrong")
    ++reward_wrong;
  else if (reason == "no_answer")
    ++reward_no_answer;
  else if (reason == "invalid")
    ++reward_invalid;
  else if (reason == "timeout")
    ++reward_timeout;
  else if (reason == "crashed")
    ++reward_crashed;
  else if (reason == "memory_limit")
    ++reward_memory_limit;
  else if (reason == "env_error")
    ++reward_env_error;
  else
    ++reward_other;
}

const char* RankReport::roleName() const {
  static constexpr const char* kNames[] = {"dataflow", "rollout", "trainer", "gateway"};
  static_assert(std::size(kNames) == std::variant_size_v<RoleReport>);
  return kNames[figures.index()];
}

std::vector<std::byte> encodeRankReport(const RankReport& report) {
  ByteWriter w;
  w.put(kRankReportFormat).put(report.rank).putString(report.label);
  w.put(report.memory_plan_bytes).put(report.peak_rss_bytes).put(report.cpu_seconds);
  w.put(report.startup_cpu_seconds).put(report.memory_plan_private_bytes).put(report.peak_private_bytes);
  w.put(static_cast<std::uint8_t>(report.figures.index()));
  std::visit([&](const auto& f) { std::decay_t<decltype(f)>::fields(f, Put{w}); }, report.figures);
  return w.take();
}

RankReport decodeRankReport(std::span<const std::byte> bytes) {
  ByteReader r(bytes, "rank report");
  RankReport out;
  std::uint16_t format = 0;
  std::uint8_t role = 0;
  if (r.get(format, "format") && format != kRankReportFormat) {
    r.fail(fmt::format("rank report: format {}, this build reads {}", format, kRankReportFormat));
  }
  r.get(out.rank, "rank");
  r.getString(out.label, "label");
  r.get(out.memory_plan_bytes, "memory_plan_bytes");
  r.get(out.peak_rss_bytes, "peak_rss_bytes");
  r.get(out.cpu_seconds, "cpu_seconds");
  r.get(out.startup_cpu_seconds, "startup_cpu_seconds");
  r.get(out.memory_plan_private_bytes, "memory_plan_private_bytes");
  r.get(out.peak_private_bytes, "peak_private_bytes");
  if (r.get(role, "role") && role >= std::variant_size_v<RoleReport>) {
    r.fail(fmt::format("rank report: role index {} (0..{})", role, std::variant_size_v<RoleReport> - 1));
  }
  if (!r.failed()) {
    emplaceAlternative(out.figures, role);
    std::visit([&](auto& f) { std::decay_t<decltype(f)>::fields(f, Get{r}); }, out.figures);
  }
  if (!r.failed()) r.finish();
  if (r.failed()) throw Error(r.error());
  return out;
}

}  // namespace astraflow
