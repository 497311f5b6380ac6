// The curriculum curator: prompts carry a difficulty in the environment's metadata
// (`difficulty`, an integer; arithmetic: digits of the longer operand). Only prompts at or below
// the current level are admitted; once the mean reward of the last `window` groups at the
// current level reaches `threshold`, the next level opens. Prompts without a difficulty are
// always admitted.
#include <nlohmann/json.hpp>

#include <deque>
#include <numeric>

#include "dataflow/builtin_plugins.hpp"

namespace astraflow {

namespace {

class CurriculumCurator : public Curator {
 public:
  CurriculumCurator(std::int64_t start, double threshold, std::int64_t window)
      : level_(start), threshold_(threshold), window_(window) {}

  std::string name() const override { return "curriculum"; }

  bool admit(const PromptInfo& prompt, std::mt19937_64&) override {
    std::int64_t d = 0;
    const bool ok = !difficulty(prompt, d) || d <= level_;
    ++(ok ? counters().admitted : counters().skipped);
    return ok;
  }

  void observe(const PromptInfo& prompt, const std::vector<double>& rewards) override {
    std::int64_t d = 0;
    if (rewards.empty() || !difficulty(prompt, d) || d != level_) return;
    recent_.push_back(std::accumulate(rewards.begin(), rewards.end(), 0.0) / static_cast<double>(rewards.size()));
    if (static_cast<std::int64_t>(recent_.size()) > window_) recent_.pop_front();
    if (static_cast<std::int64_t>(recent_.size()) == window_ &&
        std::accumulate(recent_.begin(), recent_.end(), 0.0) / static_cast<double>(window_) >= threshold_) {
      ++level_;
      recent_.clear();
    }
  }

  std::string saveState() const override {
    nlohmann::json j;
    j["level"] = level_;
    j["recent"] = std::vector<double>(recent_.begin(), recent_.end());
    return j.dump();
  }

  void loadState(const std::string& state) override {
    if (state.empty()) return;
    const auto j = nlohmann::json::parse(state);
    level_ = j.at("level").get<std::int64_t>();
    const auto recent = j.at("recent").get<std::vector<double>>();
    recent_.assign(recent.begin(), recent.end());
  }

 private:
  static bool difficulty(const PromptInfo& prompt, std::int64_t& out) {
    auto it = prompt.metadata.find("difficulty");
    if (it == prompt.metadata.end()) return false;
    try {
      out = std::stoll(it->second);
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }

  std::int64_t level_;
  double threshold_;
  std::int64_t window_;
  std::deque<double> recent_;
};

}  // namespace

std::unique_ptr<Curator> makeCurriculumCurator(const PluginSpec& spec) {
  spec.allowOnly({"start", "threshold", "window"});
  return std::make_unique<CurriculumCurator>(spec.integer("start", 1, 0, 1 << 30), spec.number("threshold", 0.7, 0, 1),
                                             spec.integer("window", 32, 1, 1 << 20));
}

}  // namespace astraflow
