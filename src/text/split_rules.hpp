#pragma once
// The regex splits of byte-level BPE tokenizers, as hand-written matchers: the GPT-4 family of
// patterns Qwen2/Qwen3 (single digits) and Llama-3 (digit runs of up to three) put in their
// Split pre-tokenizer, and GPT-2's pattern that the ByteLevel pre-tokenizer applies itself when
// `use_regex` is true. Each matcher walks the alternatives in the regex's order with the
// regex's backtracking outcome, so its pieces are the ones Oniguruma's find-all gives; a
// pattern that is none of these is refused by the tokenizer loader, never approximated.
#include <optional>
#include <string_view>
#include <vector>

#include "text/unicode.hpp"

namespace astraflow::text {

enum class SplitRule { Qwen2, Llama3, Gpt2 };

// The rule whose regex is exactly `pattern`, if any.
std::optional<SplitRule> splitRuleOf(std::string_view pattern);

// The regex a rule implements, as tokenizer.json files spell it.
std::string_view splitPattern(SplitRule rule);

// Splits `text` (valid UTF-8) into consecutive pieces that cover it, as views into it, appended
// to `pieces`; `scratch` is reused between calls to avoid an allocation per text.
struct SplitScratch {
  std::vector<char32_t> code_points;
  std::vector<unicode::CharClass> classes;
  std::vector<std::size_t> offsets;
};
void splitPieces(SplitRule rule, std::string_view text, std::vector<std::string_view>& pieces, SplitScratch& scratch);

}  // namespace astraflow::text
