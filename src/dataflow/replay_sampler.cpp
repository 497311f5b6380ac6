// The replay sampler: a share `ratio` of each batch's slots is filled from a replay pool (the
// fraction carried over between batches), the rest with the oldest fresh groups.
// Every fresh group served is copied into the pool; the pool holds at most `size` trajectories
// (oldest evicted first) and nothing older than `max_staleness` versions. ratio = 0 is plain
// fresh sampling.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
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
  double freshFraction() const override { return size_ == 0 ? 1.0 : 1.0 - ratio_; }

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
    // ratio·count replay slots per batch, the fractional part carried to the next batch (error
    // diffusion): the long-run share is exactly `ratio`, and the fresh share of every batch is
    // steady, which keeps admitted data within its staleness bound (a per-slot coin flip made
    // fresh consumption jitter and data age past η). Slots are placed at random.
    std::size_t replays = 0;
    double carry = carry_;
    if (!pool_.empty()) {
      carry += ratio_ * static_cast<double>(count);
      replays = std::min(count, static_cast<std::size_t>(std::floor(carry)));
      carry -= static_cast<double>(replays);
    }
    std::vector<bool> replay_slot(count, false);
    std::fill(replay_slot.begin(), replay_slot.begin() + static_cast<std::ptrdiff_t>(replays), true);
    std::shuffle(replay_slot.begin(), replay_slot.end(), rng);
    const std::size_t fresh = count - replays;
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
    carry_ = carry;
    return true;
  }

  std::string saveState() const override {
    nlohmann::json pool = nlohmann::json::array();
    for (const auto& g : pool_) {
      nlohmann::json records = nlohmann::json::array();
      for (const auto& t : g.members) records.push_back(toHex(encode(t)));
      pool.push_back({{"oldest_version", g.oldest_version}, {"records", records}});
    }
    return nlohmann::json{{"carry", carry_}, {"pool", pool}}.dump();
  }

  void loadState(const std::string& state) override {
    pool_.clear();
    pool_trajectories_ = 0;
    if (state.empty()) return;
    const auto j = nlohmann::json::parse(state);
    carry_ = j.at("carry").get<double>();
    for (const auto& g : j.at("pool")) {
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
  double carry_ = 0;  // fractional replay slots owed to the next batch
};

}  // namespace

std::unique_ptr<Sampler> makeReplaySampler(const PluginSpec& spec) {
  spec.allowOnly({"ratio", "size", "max_staleness"});
  return std::make_unique<ReplaySampler>(
      spec.number("ratio", 0.0, 0.0, 1.0),
      static_cast<std::uint64_t>(spec.integer("size", 10000, 0, std::int64_t{1} << 40)),
      spec.integer("max_staleness", 8, 0, 1000000));
}

}  // namespace astraflow
