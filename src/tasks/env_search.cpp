// SearchEnvironment ("search"): a tool-using lookup task over a local key–value corpus.
//
// Prompt       "value of xqz?"
// Agent turns  "<search>xqz</search>"  → "<information>xqz=417</information>"
//                                         ("<information>none</information>" if no such key)
//              "<answer>417</answer>"  → done, reward 1 iff 417 is the key's value
// Any other turn is answered "<information>none</information>"; an episode that reaches
// max_turns agent turns without an answer ends with reward 0.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "tasks/builtin_environments.hpp"
#include "tasks/deterministic_hash.hpp"
#include "tasks/text_match.hpp"

namespace astraflow {
namespace {

constexpr int kMinCorpus = 4;
constexpr int kMaxCorpus = 10000;  // of the 26^3 = 17576 possible keys
constexpr int kMaxTurnsLimit = 16;
constexpr std::uint64_t kKeySpace = 26 * 26 * 26;
constexpr std::uint64_t kValueSpace = 1000;  // values have 1 to 3 digits
constexpr std::uint64_t kCorpusSalt = 0xC0B0B5EA2C4ULL;
constexpr std::uint64_t kSplitSalt = 0x4E1D0A7C0DEULL;
// A key is held out iff hash(key) % kSearchHeldOutModulus == 0; so is 1 id in kSearchHeldOutModulus.
constexpr std::uint64_t kSearchHeldOutModulus = 5;

constexpr std::string_view kSearchOpen = "<search>";
constexpr std::string_view kSearchClose = "</search>";
constexpr std::string_view kAnswerOpen = "<answer>";
constexpr std::string_view kAnswerClose = "</answer>";
constexpr std::string_view kNoInformation = "<information>none</information>";

// The text between `open` and the `close` tag at `close_pos`, if `open` precedes it.
std::optional<std::string_view> tagContent(std::string_view action, std::string_view open, std::size_t close_pos) {
  const auto open_pos = action.substr(0, close_pos).rfind(open);
  if (open_pos == std::string_view::npos) return std::nullopt;
  return detail::trimSpaces(action.substr(open_pos + open.size(), close_pos - open_pos - open.size()));
}

struct Fact {
  std::string key;
  int value = 0;
};

class SearchEnvironment final : public Environment {
 public:
  explicit SearchEnvironment(const EnvironmentOptions& options) : max_turns_(options.max_turns) {
    if (options.corpus_size < kMinCorpus || options.corpus_size > kMaxCorpus) {
      throw std::invalid_argument(fmt::format("environment.corpus_size: {} is outside the allowed range [{}, {}]",
                                              options.corpus_size, kMinCorpus, kMaxCorpus));
    }
    if (max_turns_ < 1 || max_turns_ > kMaxTurnsLimit) {
      throw std::invalid_argument(
          fmt::format("environment.max_turns: {} is outside the allowed range [1, {}]", max_turns_, kMaxTurnsLimit));
    }
    buildCorpus(static_cast<std::uint64_t>(options.corpus_size), options.corpus_seed);
    splitCorpus();
  }

  std::string name() const override { return "search"; }

  std::string reset(std::uint64_t problem_id) override {
    current_ = factOf(problem_id);
    turns_ = 0;
    started_ = true;
    done_ = false;
    return fmt::format("value of {}?", corpus_[current_].key);
  }

  StepResult step(std::string_view action) override {
    if (!started_) throw std::logic_error("search environment: step() before reset()");
    if (done_) throw std::logic_error("search environment: step() after the episode ended");
    ++turns_;
    StepResult result;
    // Generation stops at the first stop tag, so the earliest closing tag is the turn's tool call.
    const auto search_close = action.find(kSearchClose);
    const auto answer_close = action.find(kAnswerClose);
    if (answer_close != std::string_view::npos && answer_close < search_close) {
      if (auto answer = tagContent(action, kAnswerOpen, answer_close)) {
        result.done = true;
        result.reward = *answer == std::to_string(corpus_[current_].value) ? 1.0 : 0.0;
      }
    } else if (search_close != std::string_view::npos) {
      if (auto query = tagContent(action, kSearchOpen, search_close)) result.observation = lookup(*query);
    }
    if (!result.done && result.observation.empty()) result.observation = kNoInformation;
    if (!result.done && turns_ >= max_turns_) {
      result.done = true;  // out of turns: reward stays 0, nothing more to read
      result.observation.clear();
    }
    done_ = result.done;
    return result;
  }

  std::vector<std::string> referenceActions() const override {
    if (!started_) return {};
    const Fact& fact = corpus_[current_];
    return {fmt::format("{}{}{}", kSearchOpen, fact.key, kSearchClose),
            fmt::format("{}{}{}", kAnswerOpen, fact.value, kAnswerClose)};
  }
  std::vector<std::string> stopStrings() const override {
    return {std::string(kSearchClose), std::string(kAnswerClose)};
  }
  int maxTurns() const override { return max_turns_; }

  // Ids ≡ 0 (mod 5) are held out, the others train; factOf() maps each id onto its side's keys,
  // cycling through them in corpus order, so both maps are O(1) and exact.
  std::uint64_t trainingId(std::uint64_t k) const override {
    return (k / (kSearchHeldOutModulus - 1)) * kSearchHeldOutModulus + k % (kSearchHeldOutModulus - 1) + 1;
  }
  std::uint64_t heldOutId(std::uint64_t k) const override { return k * kSearchHeldOutModulus; }

  std::map<std::string, std::string> metadata() const override {
    if (!started_) return {};
    return {{"key", corpus_[current_].key}, {"turn_limit", std::to_string(max_turns_)}};
  }

 private:
  // corpus_size distinct keys: a partial Fisher–Yates shuffle of all 3-letter words.
  void buildCorpus(std::uint64_t size, std::uint64_t seed) {
    std::vector<std::uint32_t> words(kKeySpace);
    for (std::uint32_t i = 0; i < kKeySpace; ++i) words[i] = i;
    detail::MixStream stream(detail::hashCombine(kCorpusSalt, seed));
    corpus_.reserve(size);
    for (std::uint64_t i = 0; i < size; ++i) {
      std::swap(words[i], words[i + stream.below(kKeySpace - i)]);
      const std::uint32_t w = words[i];
      Fact fact;
      fact.key = {static_cast<char>('a' + w / 676), static_cast<char>('a' + w / 26 % 26),
                  static_cast<char>('a' + w % 26)};
      fact.value = static_cast<int>(stream.below(kValueSpace));
      index_.emplace(fact.key, static_cast<int>(i));
      corpus_.push_back(std::move(fact));
    }
  }

  // By key content: hash(key) % 5 == 0 is held out. A small corpus can land entirely on one
  // side (0.8^4 ≈ 41% of 4-fact corpora have no held-out key); then the ceil(size/5) keys of
  // smallest hash are held out instead, so both sides are non-empty and still disjoint.
  void splitCorpus() {
    std::vector<std::pair<std::uint64_t, int>> hashed;
    for (int i = 0; i < static_cast<int>(corpus_.size()); ++i) {
      hashed.emplace_back(detail::hashString(kSplitSalt, corpus_[i].key), i);
    }
    std::vector<bool> held_out(corpus_.size());
    for (const auto& [h, i] : hashed) held_out[i] = h % kSearchHeldOutModulus == 0;
    const auto n_held_out = std::count(held_out.begin(), held_out.end(), true);
    if (n_held_out == 0 || n_held_out == static_cast<long>(corpus_.size())) {
      std::sort(hashed.begin(), hashed.end());
      const std::size_t n = (corpus_.size() + kSearchHeldOutModulus - 1) / kSearchHeldOutModulus;
      for (std::size_t r = 0; r < hashed.size(); ++r) held_out[hashed[r].second] = r < n;
    }
    for (int i = 0; i < static_cast<int>(corpus_.size()); ++i) (held_out[i] ? held_out_ : training_).push_back(i);
  }

  int factOf(std::uint64_t problem_id) const {
    if (problem_id % kSearchHeldOutModulus == 0)
      return held_out_[(problem_id / kSearchHeldOutModulus) % held_out_.size()];
    const std::uint64_t k = problem_id - problem_id / kSearchHeldOutModulus - 1;  // inverse of trainingId
    return training_[k % training_.size()];
  }

  std::string lookup(std::string_view key) const {
    const auto it = index_.find(std::string(key));
    if (it == index_.end()) return std::string(kNoInformation);
    const Fact& fact = corpus_[it->second];
    return fmt::format("<information>{}={}</information>", fact.key, fact.value);
  }

  int max_turns_;
  std::vector<Fact> corpus_;                    // in generation order
  std::unordered_map<std::string, int> index_;  // key → position in corpus_
  std::vector<int> training_;                   // corpus positions, in corpus order
  std::vector<int> held_out_;
  int current_ = 0;
  int turns_ = 0;
  bool started_ = false;
  bool done_ = false;
};

}  // namespace

namespace detail {
std::unique_ptr<Environment> makeSearchEnvironment(const EnvironmentOptions& options) {
  return std::make_unique<SearchEnvironment>(options);
}
}  // namespace detail

}  // namespace astraflow
