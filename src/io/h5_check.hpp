#pragma once
// ASTRA_H5_CHECK: the one way src/io calls HDF5. A negative result (the failure value of
// herr_t, hid_t, htri_t and hssize_t alike) becomes an astraflow::H5Error carrying the
// process location, file:line, the call's text, an optional context ("opening '<path>'") and
// HDF5's own error stack.
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "astraflow/io/h5.hpp"

static_assert(std::is_same_v<hid_t, std::int64_t>, "h5.hpp passes hid_t as std::int64_t; this HDF5 is older than 1.10");

namespace astraflow::io::detail {

// Turns off HDF5's printing of every error stack to stderr (we report it in the exception
// instead). Cheap after the first call, so every check runs it before its call.
void silenceAutoErrorPrinting() noexcept;

// The default error stack as text (one line per entry), and clears it.
std::string takeErrorStack();

[[noreturn]] void throwCallFailure(const char* call_text, const char* file, int line, std::string_view context);
// For content that does not match what the caller asked for (wrong type, wrong rank...).
[[noreturn]] void throwContentError(std::string_view what, const char* file, int line);

template <class R>
R h5Check(R result, const char* call_text, const char* file, int line, std::string_view context = {}) {
  if (result < 0) throwCallFailure(call_text, file, line, context);
  return result;
}

// Native memory type of an element type (a predefined id: never closed).
hid_t nativeTypeOf(ElementType type);
std::size_t elementSize(ElementType type);

}  // namespace astraflow::io::detail

#define ASTRA_H5_CHECK(call, ...)                       \
  (::astraflow::io::detail::silenceAutoErrorPrinting(), \
   ::astraflow::io::detail::h5Check((call), #call, __FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__))

#define ASTRA_H5_FAIL(what) ::astraflow::io::detail::throwContentError((what), __FILE__, __LINE__)
