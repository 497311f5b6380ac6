// The replay sampler: each slot of a batch is filled from a replay pool with probability
// `ratio` (so the replayed fraction is binomial around ratio), else with the oldest fresh group.
// Every fresh group served is copied into the pool; the pool holds at most `size` trajectories
// (oldest evicted first) and nothing older than `max_staleness` versions. ratio = 0 is plain
// fresh sampling.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

#include "dataflow/builtin_plugins.hpp"

namespace astraflow {

namespace {

std::string toHex(const std::vector<std::byte>& bytes) {
  static const char* const digits = "0123456789abcdef";
  std::string out(2 * bytes.size(), '0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<unsigned>(bytes[i]);
    out[2 * i] = digits[b >> 4];
    out[2 * i + 1] = digits[b & 15];
  }
  return out;
}

std::vector<std::byte> fromHex(const std::string& hex) {
  if (hex.size() % 2 != 0) throw Error("replay state: odd hex length");
  std::vector<std::byte> out(hex.size() / 2);
  auto nibble = [](char c) -> unsigned {
    if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
    throw Error("replay state: bad hex digit");
  };
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::byte((nibble(hex[2 * i]) << 4) | nibble(hex[2 * i + 1]));
  return out;
}

class ReplaySampler : public Sampler {
 public:
  ReplaySampler(double ratio, std::uint64_t size, std::int64_t max_staleness)
      : ratio_(ratio), size_(size), max_staleness_(max_staleness) {}

  std::string name() const override { return "replay"; }
  std::int64_t maxStaleness() const override { return ratio_ > 0 ? max_staleness_ : 0; }

  bool take(std::deque<ReadyGroup>& ready, std::size_t count, std::int64_t version, std::mt19937_64& rng,
            std::vector<ReadyGroup>& out) override {
    for (auto it = pool_.begin(); it != pool_.end();) {
      if (version - it->oldest_version > max_staleness_) {
        pool_trajectories_ -= it->members.size();
        it = pool_.erase(it);
      } else {
        ++it;
      }
    }
    std::bernoulli_distribution from_pool(ratio_);
    std::vector<bool> replay_slot(count);
    std::size_t fresh = 0;
    for (std::size_t i = 0; i < count; ++i) {
      replay_slot[i] = !pool_.empty() && from_pool(rng);
      if (!replay_slot[i]) ++fresh;
    }
    if (ready.size() < fresh) return false;
    std::vector<ReadyGroup> taken;
    for (std::size_t i = 0; i < fresh; ++i) {
      taken.push_back(std::move(ready.front()));
      ready.pop_front();
    }
    std::uniform_int_distribution<std::size_t> any(0, pool_.empty() ? 0 : pool_.size() - 1);
    std::size_t next_fresh = 0;
    for (std::size_t i = 0; i < count; ++i) {
      if (replay_slot[i]) {
        const ReadyGroup& g = pool_[any(rng)];
        counters().replayed += g.members.size();
        out.push_back(g);
      } else {
        out.push_back(taken[next_fresh++]);
      }
    }
    for (auto& g : taken) remember(std::move(g));
    return true;
  }

  std::string saveState() const override {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& g : pool_) {
      nlohmann::json records = nlohmann::json::array();
      for (const auto& t : g.members) records.push_back(toHex(encode(t)));
      j.push_back({{"oldest_version", g.oldest_version}, {"records", records}});
    }
    return j.dump();
  }

  void loadState(const std::string& state) override {
    pool_.clear();
    pool_trajectories_ = 0;
    if (state.empty()) return;
    for (const auto& g : nlohmann::json::parse(state)) {
      ReadyGroup group;
      group.oldest_version = g.at("oldest_version").get<std::int64_t>();
      for (const auto& hex : g.at("records")) {
        auto decoded = decodeTrajectory(fromHex(hex.get<std::string>()));
        group.members.push_back(std::move(decoded).value());
      }
      pool_trajectories_ += group.members.size();
      pool_.push_back(std::move(group));
    }
  }

  std::uint64_t poolTrajectories() const { return pool_trajectories_; }

 private:
  void remember(ReadyGroup g) {
    if (size_ == 0 || ratio_ == 0) return;
    pool_trajectories_ += g.members.size();
    pool_.push_back(std::move(g));
    while (pool_trajectories_ > size_ && !pool_.empty()) evictFront();
  }
  void evictFront() {
    pool_trajectories_ -= pool_.front().members.size();
    pool_.pop_front();
  }

  double ratio_;
  std::uint64_t size_;
  std::int64_t max_staleness_;
  std::deque<ReadyGroup> pool_;  // oldest first
  std::uint64_t pool_trajectories_ = 0;
};

}  // namespace

std::unique_ptr<Sampler> makeReplaySampler(const PluginSpec& spec) {
  spec.allowOnly({"ratio", "size", "max_staleness"});
  return std::make_unique<ReplaySampler>(spec.number("ratio", 0.0, 0.0, 1.0),
                                         static_cast<std::uint64_t>(spec.integer("size", 10000, 0, std::int64_t{1} << 40)),
                                         spec.integer("max_staleness", 8, 0, 1000000));
}

}  // namespace astraflow
