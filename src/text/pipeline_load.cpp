// readNormalizer, readPreTokenizer, readDecoder: a tokenizer.json's normaliser, pre-tokenizer and decoder turned into
// the steps the encoder runs; any other component type is refused by name.
#include "text/pipeline_load.hpp"

#include "text/unicode.hpp"

namespace astraflow::text {
namespace {

using nlohmann::json;

// A Split's, Replace's {"Regex": ...} or {"String": ...}, compiled by Oniguruma.
std::unique_ptr<Pattern> patternOf(const JsonReader& r, const json& j, const std::string& where) {
  const json& p = j.contains("pattern") ? j["pattern"] : json();
  try {
    if (p.is_object() && p.contains("Regex") && p["Regex"].is_string())
      return std::make_unique<RegexPattern>(p["Regex"].get<std::string>(), OnigPattern::Syntax::Regex);
    if (p.is_object() && p.contains("String") && p["String"].is_string())
      return std::make_unique<RegexPattern>(p["String"].get<std::string>(), OnigPattern::Syntax::Literal);
  } catch (const Error& e) {
    r.fail(where, e.what());
  }
  r.fail(where, "has no {\"Regex\": ...} or {\"String\": ...} pattern");
}

char32_t singleCharOf(const JsonReader& r, const json& j, const char* key, const std::string& where) {
  const std::string s = r.string(j, key, where);
  try {
    std::size_t pos = 0;
    const char32_t c = s.empty() ? 0 : unicode::nextCodePoint(s, pos);
    if (!s.empty() && pos == s.size()) return c;
  } catch (const Error&) {
  }
  r.fail(where, fmt::format("\"{}\" is not one character", key));
}

std::size_t countOf(const JsonReader& r, const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number_unsigned()) r.fail(where, fmt::format("has no \"{}\" count", key));
  return j[key].get<std::size_t>();
}

SplitBehavior behaviorOf(const JsonReader& r, const json& j, const std::string& where) {
  const std::string name = j.contains("behavior") ? r.string(j, "behavior", where) : "Isolated";
  const auto behavior = splitBehaviorOf(name);
  if (!behavior)
    r.fail(where, fmt::format("behavior '{}' is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                              "Contiguous",
                              name));
  return *behavior;
}

// prepend_scheme, or the older add_prefix_space it replaced (false: never).
PrependScheme prependSchemeOf(const JsonReader& r, const json& j, const std::string& where) {
  const bool has_scheme = j.contains("prepend_scheme") && !j["prepend_scheme"].is_null();
  PrependScheme scheme = PrependScheme::Always;
  if (has_scheme) {
    const std::string name = r.string(j, "prepend_scheme", where);
    if (name == "always")
      scheme = PrependScheme::Always;
    else if (name == "first")
      scheme = PrependScheme::First;
    else if (name == "never")
      scheme = PrependScheme::Never;
    else
      r.fail(where, fmt::format("prepend_scheme '{}' is not always, first or never", name));
  }
  if (!r.flag(j, "add_prefix_space", true)) {
    if (has_scheme && scheme != PrependScheme::Never)
      r.fail(where, "add_prefix_space: false contradicts the prepend_scheme");
    scheme = PrependScheme::Never;
  }
  return scheme;
}

std::unique_ptr<PreTokenizer> charSplit(bool (*test)(char32_t), SplitBehavior behavior) {
  return std::make_unique<PatternSplit>(std::make_unique<CharPattern>(test), behavior, false);
}

}  // namespace

void readNormalizer(const JsonReader& r, const json& j, Normalizers& out) {
  if (j.is_null()) return;
  const std::string type = r.typeOf(j, "normalizer");
  const std::string where = "normalizer " + type;
  if (type == "Sequence") {
    for (const json& n : j.value("normalizers", json::array())) readNormalizer(r, n, out);
  } else if (type == "NFC") {
    out.push_back(std::make_unique<NormalFormNormalizer>(unicode::NormalForm::NFC));
  } else if (type == "NFD") {
    out.push_back(std::make_unique<NormalFormNormalizer>(unicode::NormalForm::NFD));
  } else if (type == "NFKC") {
    out.push_back(std::make_unique<NormalFormNormalizer>(unicode::NormalForm::NFKC));
  } else if (type == "NFKD") {
    out.push_back(std::make_unique<NormalFormNormalizer>(unicode::NormalForm::NFKD));
  } else if (type == "Lowercase") {
    out.push_back(std::make_unique<LowercaseNormalizer>());
  } else if (type == "Strip") {
    out.push_back(std::make_unique<StripNormalizer>(r.flag(j, "strip_left", true), r.flag(j, "strip_right", true)));
  } else if (type == "Replace") {
    out.push_back(std::make_unique<ReplaceNormalizer>(patternOf(r, j, where), r.string(j, "content", where)));
  } else if (type == "Prepend") {
    out.push_back(std::make_unique<PrependNormalizer>(r.string(j, "prepend", where)));
  } else {
    r.unsupported("normalizer", type, "NFC, NFD, NFKC, NFKD, Lowercase, Strip, Replace, Prepend, Sequence of them");
  }
}

void readPreTokenizer(const JsonReader& r, const json& j, PreTokenizerChain& out) {
  if (j.is_null()) return;
  const std::string type = r.typeOf(j, "pre_tokenizer");
  const std::string where = "pre_tokenizer " + type;
  if (type == "Sequence") {
    for (const json& p : j.value("pretokenizers", json::array())) readPreTokenizer(r, p, out);
    return;
  }
  if (out.byte_level.enabled) r.fail(where, "follows ByteLevel, whose byte symbols nothing else splits");
  auto& steps = out.steps;
  if (type == "Split") {
    const SplitBehavior behavior = behaviorOf(r, j, where);
    const bool invert = r.flag(j, "invert", false);
    const json& pattern = j.value("pattern", json::object());
    const auto rule = pattern.contains("Regex") && pattern["Regex"].is_string()
                          ? splitRuleOf(pattern["Regex"].get<std::string>())
                          : std::nullopt;
    if (rule && behavior == SplitBehavior::Isolated && !invert)
      steps.push_back(std::make_unique<RuleSplit>(*rule));
    else
      steps.push_back(std::make_unique<PatternSplit>(patternOf(r, j, where), behavior, invert));
  } else if (type == "ByteLevel") {
    out.byte_level = {true, r.flag(j, "add_prefix_space", true), r.flag(j, "use_regex", true)};
  } else if (type == "Metaspace") {
    steps.push_back(std::make_unique<MetaspaceSplit>(singleCharOf(r, j, "replacement", where),
                                                     prependSchemeOf(r, j, where), r.flag(j, "split", true)));
  } else if (type == "Digits") {
    // Each digit alone, or runs of digits together.
    steps.push_back(charSplit(unicode::isNumeric, r.flag(j, "individual_digits", false) ? SplitBehavior::Isolated
                                                                                        : SplitBehavior::Contiguous));
  } else if (type == "Punctuation") {
    steps.push_back(charSplit(unicode::isPunctuation, behaviorOf(r, j, where)));
  } else if (type == "WhitespaceSplit") {
    steps.push_back(charSplit(unicode::isWhitespace, SplitBehavior::Removed));
  } else if (type == "Whitespace") {
    // Runs of word characters and of other non-space characters; the spaces between go.
    steps.push_back(std::make_unique<PatternSplit>(std::make_unique<WordRunPattern>(), SplitBehavior::Removed, true));
  } else if (type == "BertPreTokenizer") {
    steps.push_back(charSplit(unicode::isWhitespace, SplitBehavior::Removed));
    steps.push_back(charSplit(unicode::isPunctuation, SplitBehavior::Isolated));
  } else if (type == "CharDelimiterSplit") {
    const char32_t delimiter = singleCharOf(r, j, "delimiter", where);
    steps.push_back(std::make_unique<PatternSplit>(
        std::make_unique<CharPattern>([delimiter](char32_t c) { return c == delimiter; }), SplitBehavior::Removed,
        false));
  } else {
    r.unsupported("pre_tokenizer", type,
                  "Split, ByteLevel, Metaspace, Digits, Punctuation, WhitespaceSplit, Whitespace, BertPreTokenizer, "
                  "CharDelimiterSplit, Sequence of them");
  }
}

void readDecoder(const JsonReader& r, const json& j, Decoders& out) {
  if (j.is_null()) return;
  const std::string type = r.typeOf(j, "decoder");
  const std::string where = "decoder " + type;
  if (type == "Sequence") {
    for (const json& d : j.value("decoders", json::array())) readDecoder(r, d, out);
  } else if (type == "ByteLevel") {
    out.push_back(std::make_unique<ByteLevelDecoder>());
  } else if (type == "ByteFallback") {
    out.push_back(std::make_unique<ByteFallbackDecoder>());
  } else if (type == "Fuse") {
    out.push_back(std::make_unique<FuseDecoder>());
  } else if (type == "Strip") {
    out.push_back(std::make_unique<StripDecoder>(singleCharOf(r, j, "content", where), countOf(r, j, "start", where),
                                                 countOf(r, j, "stop", where)));
  } else if (type == "Replace") {
    out.push_back(std::make_unique<ReplaceDecoder>(patternOf(r, j, where), r.string(j, "content", where)));
  } else if (type == "Metaspace") {
    out.push_back(
        std::make_unique<MetaspaceDecoder>(singleCharOf(r, j, "replacement", where), prependSchemeOf(r, j, where)));
  } else {
    r.unsupported("decoder", type, "ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, Sequence of them");
  }
}

}  // namespace astraflow::text
