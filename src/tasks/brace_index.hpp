#pragma once
// The matching '}' of every '{' of a text, paired in one pass (\{ and \} are literal braces): the
// math reward finds boxes and unwraps commands with it, so that no answer — thousands of nested
// or unclosed braces — costs more than one pass. Private to src/tasks.
#include <string_view>
#include <vector>

namespace astraflow::detail {

class BraceIndex {
 public:
  explicit BraceIndex(std::string_view s) : base_(s.data()), close_(s.size(), std::string_view::npos) {
    std::vector<std::size_t> open;
    for (std::size_t k = 0; k < s.size(); ++k) {
      if (s[k] == '\\' && k + 1 < s.size()) {
        ++k;
        continue;
      }
      if (s[k] == '{') open.push_back(k);
      if (s[k] == '}' && !open.empty()) {
        close_[open.back()] = k;
        open.pop_back();
      }
    }
  }
  // The '}' that closes the '{' at `open`; npos when it is not a '{' or is never closed.
  std::size_t closeOf(std::size_t open) const { return open < close_.size() ? close_[open] : std::string_view::npos; }
  // The same for the '{' at part[open], where `part` is a view into the indexed text; an index
  // into `part`.
  std::size_t closeIn(std::string_view part, std::size_t open) const {
    const auto offset = static_cast<std::size_t>(part.data() - base_);
    const std::size_t at = closeOf(offset + open);
    return at == std::string_view::npos ? at : at - offset;
  }

 private:
  const char* base_;
  std::vector<std::size_t> close_;
};

}  // namespace astraflow::detail
