// GRESO selective rollout (the paper's defaults; docs/data-algorithms.md): skip prompts that
// keep producing zero-variance groups. Per prompt: z = consecutive zero-variance epochs and the
// last mean reward (easy when ≥ 0.5, else hard). A prompt is submitted with probability
// max(p_bucket^z, floor_bucket) — always when z = 0. Every `update_every` observed groups,
// p_easy and p_hard move by Δp toward the target zero-variance ratios: down when the bucket's
// observed zero-variance ratio exceeds its target α (skip more), up otherwise.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "dataflow/builtin_plugins.hpp"

namespace astraflow {

namespace {

struct GresoOptions {
  double p_easy = 0.5, p_hard = 0.5;
  double floor_easy = 0.05, floor_hard = 0.30;
  double delta = 0.01;
  double alpha_easy = 0.083, alpha_hard = 0.167;
  std::int64_t update_every = 16;
};

class GresoCurator : public Curator {
 public:
  explicit GresoCurator(GresoOptions o) : o_(o), p_easy_(o.p_easy), p_hard_(o.p_hard) {}

  std::string name() const override { return "greso"; }

  bool admit(const PromptInfo& prompt, std::mt19937_64& rng) override {
    const double p = submitProbability(prompt.problem_id);
    const bool take = p >= 1.0 || std::uniform_real_distribution<double>(0.0, 1.0)(rng) < p;
    ++(take ? counters().admitted : counters().skipped);
    return take;
  }

  void observe(const PromptInfo& prompt, const std::vector<double>& rewards) override {
    const std::uint64_t problem_id = prompt.problem_id;
    if (rewards.empty()) return;
    double mean = 0;
    bool zero_variance = true;
    for (double r : rewards) {
      mean += r;
      zero_variance = zero_variance && r == rewards.front();
    }
    mean /= static_cast<double>(rewards.size());
    auto& h = history_[problem_id];
    h.z = zero_variance ? h.z + 1 : 0;
    h.last_mean = mean;
    const bool easy = mean >= 0.5;
    ++(easy ? window_easy_ : window_hard_);
    if (zero_variance) ++(easy ? window_easy_zero_ : window_hard_zero_);
    if (++window_ >= o_.update_every) adapt();
  }

  // Exposed for tests through saveState(): p_easy, p_hard and the per-prompt history.
  std::string saveState() const override {
    nlohmann::json j;
    j["p_easy"] = p_easy_;
    j["p_hard"] = p_hard_;
    j["window"] = {window_, window_easy_, window_easy_zero_, window_hard_, window_hard_zero_};
    nlohmann::json prompts = nlohmann::json::array();
    for (const auto& [id, h] : history_) prompts.push_back({id, h.z, h.last_mean});
    j["prompts"] = prompts;
    return j.dump();
  }

  void loadState(const std::string& state) override {
    if (state.empty()) return;
    const auto j = nlohmann::json::parse(state);
    p_easy_ = j.at("p_easy").get<double>();
    p_hard_ = j.at("p_hard").get<double>();
    const auto& w = j.at("window");
    window_ = w.at(0).get<std::int64_t>();
    window_easy_ = w.at(1).get<std::int64_t>();
    window_easy_zero_ = w.at(2).get<std::int64_t>();
    window_hard_ = w.at(3).get<std::int64_t>();
    window_hard_zero_ = w.at(4).get<std::int64_t>();
    history_.clear();
    for (const auto& p : j.at("prompts")) {
      history_[p.at(0).get<std::uint64_t>()] = {p.at(1).get<std::int64_t>(), p.at(2).get<double>()};
    }
  }

 private:
  struct History {
    std::int64_t z = 0;
    double last_mean = 0;
  };

  double submitProbability(std::uint64_t problem_id) const {
    auto it = history_.find(problem_id);
    if (it == history_.end() || it->second.z == 0) return 1.0;
    const bool easy = it->second.last_mean >= 0.5;
    const double p = easy ? p_easy_ : p_hard_;
    const double floor = easy ? o_.floor_easy : o_.floor_hard;
    return std::max(std::pow(p, static_cast<double>(it->second.z)), floor);
  }

  void adapt() {
    auto step = [&](double& p, std::int64_t n, std::int64_t zero, double alpha) {
      if (n == 0) return;
      const double ratio = static_cast<double>(zero) / static_cast<double>(n);
      p = ratio > alpha ? std::max(0.0, p - o_.delta) : std::min(1.0, p + o_.delta);
    };
    step(p_easy_, window_easy_, window_easy_zero_, o_.alpha_easy);
    step(p_hard_, window_hard_, window_hard_zero_, o_.alpha_hard);
    window_ = window_easy_ = window_easy_zero_ = window_hard_ = window_hard_zero_ = 0;
  }

  GresoOptions o_;
  double p_easy_, p_hard_;
  std::map<std::uint64_t, History> history_;  // ordered: the saved state is deterministic
  std::int64_t window_ = 0, window_easy_ = 0, window_easy_zero_ = 0, window_hard_ = 0, window_hard_zero_ = 0;
};

}  // namespace

std::unique_ptr<Curator> makeGresoCurator(const PluginSpec& spec) {
  spec.allowOnly({"p_easy", "p_hard", "floor_easy", "floor_hard", "delta", "alpha_easy", "alpha_hard", "update_every"});
  GresoOptions o;
  o.p_easy = spec.number("p_easy", o.p_easy, 0, 1);
  o.p_hard = spec.number("p_hard", o.p_hard, 0, 1);
  o.floor_easy = spec.number("floor_easy", o.floor_easy, 0, 1);
  o.floor_hard = spec.number("floor_hard", o.floor_hard, 0, 1);
  o.delta = spec.number("delta", o.delta, 0, 1);
  o.alpha_easy = spec.number("alpha_easy", o.alpha_easy, 0, 1);
  o.alpha_hard = spec.number("alpha_hard", o.alpha_hard, 0, 1);
  o.update_every = spec.integer("update_every", o.update_every, 1, 1 << 30);
  return std::make_unique<GresoCurator>(o);
}

}  // namespace astraflow
