// Turning HDF5's error stack into astraflow::H5Error (see h5_check.hpp).
#include <fmt/format.h>

#include <array>
#include <cstring>
#include <iterator>
#include <mutex>

#include "io/h5_check.hpp"

namespace astraflow::io::detail {
namespace {

herr_t appendStackEntry(unsigned n, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<std::string*>(data);
  std::array<char, 160> major{};
  std::array<char, 160> minor{};
  if (H5Eget_msg(err->maj_num, nullptr, major.data(), major.size()) < 0) major[0] = '\0';
  if (H5Eget_msg(err->min_num, nullptr, minor.data(), minor.size()) < 0) minor[0] = '\0';
  fmt::format_to(std::back_inserter(*out), "\n  #{:03} {}(): {} [{}: {}]", n, err->func_name ? err->func_name : "?",
                 err->desc ? err->desc : "", major.data(), minor.data());
  return 0;
}

// "/work/main/src/io/h5_file.cpp" -> "src/io/h5_file.cpp": the build path says nothing.
std::string_view shortSourcePath(const char* file) {
  std::string_view path(file);
  const auto at = path.rfind("src/");
  return at == std::string_view::npos ? path : path.substr(at);
}

}  // namespace

void silenceAutoErrorPrinting() noexcept {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

std::string takeErrorStack() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, appendStackEntry, &text);
  H5Eclear2(H5E_DEFAULT);
  return text.empty() ? std::string("\n  (HDF5 error stack is empty)") : text;
}

void throwCallFailure(const char* call_text, const char* file, int line, std::string_view context) {
  std::string stack = takeErrorStack();
  // HDF5 locks a file it has open for writing; the usual holder is a rank of an earlier job
  // that is still alive (killed mpirun, orphaned rank). One line says so instead of the stack.
  if (stack.find("unable to lock file") != std::string::npos)
    throw H5Error(
        fmt::format("{}: the file is locked by another process, most likely a rank of an earlier job "
                    "that is still alive (`fuser -v <file>` names it; end it), or another job writing "
                    "into the same run folder",
                    context.empty() ? std::string_view(call_text) : context));
  throw H5Error(fmt::format("HDF5 error on {} at {}:{}: {}{}{} failed; HDF5 error stack:{}", processLocation(),
                            shortSourcePath(file), line, context, context.empty() ? "" : ": ", call_text, stack));
}

void throwContentError(std::string_view what, const char* file, int line) {
  throw H5Error(fmt::format("HDF5 error on {} at {}:{}: {}", processLocation(), shortSourcePath(file), line, what));
}

}  // namespace astraflow::io::detail
