// TrajectoryWriter and readTrajectories (layout in trajectory_writer.hpp).
#include "astraflow/io/trajectory_writer.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <concepts>
#include <limits>
#include <utility>

#include "io/h5_check.hpp"

namespace astraflow::io {
namespace {

constexpr const char* kTrajectoryFormatName = "astraflow-trajectories";
constexpr const char* kTokensPath = "tokens";
constexpr const char* kPolicyMaskPath = "policy_mask";
constexpr const char* kLogprobsFlatPath = "behav_logprobs_flat";
constexpr const char* kVersionsFlatPath = "token_versions_flat";
constexpr std::int64_t kFirstFormatVersion = 1;  // before /token_versions_flat: read, never appended to
constexpr const char* kTokenOffsetPath = "token_offset";
constexpr const char* kRewardPath = "reward";
constexpr const char* kPolicyPath = "policy";
constexpr const char* kPolicyNamesPath = "policy_names";

// Rows per chunk of the per-row datasets: 8 KiB for an 8-byte column, so a short run's file
// stays small while a long one is not split into tiny chunks.
constexpr std::uint64_t kChunkRows = 1024;

template <class S>
struct Stored {};  // names the file type of a column

// Calls f(name, member, Stored<file type>{}) for every plain column: one row value copied from
// one Trajectory member. One list drives creating, opening, appending and reading, so no column
// can be forgotten by one of them. Unsigned 32-bit members are stored as int64, which holds
// them exactly and stays signed for numpy arithmetic.
template <class F>
void forEachColumn(F&& f) {
  f("task_id", &Trajectory::task_id, Stored<std::uint64_t>{});
  f("problem_id", &Trajectory::problem_id, Stored<std::uint64_t>{});
  f("group_id", &Trajectory::group_id, Stored<std::uint64_t>{});
  f("group_index", &Trajectory::group_index, Stored<std::int64_t>{});
  f("producer_rank", &Trajectory::producer_rank, Stored<std::int32_t>{});
  f("pool_uid", &Trajectory::pool_uid, Stored<std::int64_t>{});
  f("weight_version_min", &Trajectory::weight_version_min, Stored<std::int64_t>{});
  f("weight_version_max", &Trajectory::weight_version_max, Stored<std::int64_t>{});
  f("t_queued", &Trajectory::t_queued, Stored<double>{});
  f("t_started", &Trajectory::t_started, Stored<double>{});
  f("t_finished", &Trajectory::t_finished, Stored<double>{});
  f("turns", &Trajectory::turns, Stored<std::int64_t>{});
  f("status", &Trajectory::status, Stored<std::int32_t>{});
}

// The file's format version: this build's, or (`readable_old`) one it can still read.
std::int64_t checkFormat(const H5File& file, const std::string& path, bool readable_old) {
  const std::string format = file.hasAttribute("format") ? file.readStringAttribute("format") : std::string("(none)");
  if (format != kTrajectoryFormatName) {
    ASTRA_H5_FAIL(fmt::format("'{}' is not an astraflow trajectory file: attribute format is '{}', expected '{}'", path,
                              format, kTrajectoryFormatName));
  }
  const std::int64_t version = file.readInt64Attribute("format_version");
  const bool old = readable_old && version >= kFirstFormatVersion && version < kTrajectoryFormatVersion;
  if (version != kTrajectoryFormatVersion && !old) {
    ASTRA_H5_FAIL(fmt::format("trajectory file '{}' has format_version {}, this build {} {}", path, version,
                              readable_old ? "reads" : "appends to", kTrajectoryFormatVersion));
  }
  return version;
}

// Opens a plain column and checks its type now, so that a foreign file fails on opening rather
// than half-way through an append.
template <H5Scalar S>
H5Dataset openColumn(const H5File& file, const char* name) {
  auto dataset = file.openDataset(name);
  const auto stored = dataset.type();
  if (!stored.holds(elementTypeOf<S>()) || dataset.shape().size() != 1) {
    ASTRA_H5_FAIL(fmt::format("trajectory file '{}': /{} holds {} with rank {}, expected 1-D {}", file.path(), name,
                              stored.describe(), dataset.shape().size(), elementTypeName(elementTypeOf<S>())));
  }
  return dataset;
}

// A stored value as the member's type; a value the member cannot hold means a foreign file.
template <class M, class S>
M narrowed(S value, const char* name, std::size_t row, const std::string& path) {
  if constexpr (std::integral<M>) {
    if (!std::in_range<M>(value)) {
      ASTRA_H5_FAIL(fmt::format("trajectory file '{}': /{}[{}] = {} is out of range", path, name, row, value));
    }
  }
  return static_cast<M>(value);
}

}  // namespace

// ---- TrajectoryWriter ----------------------------------------------------------------------

TrajectoryWriter::TrajectoryWriter(H5File file, std::size_t flush_every)
    : file_(std::move(file)), flush_every_(std::max<std::size_t>(1, flush_every)) {
  buffer_.reserve(flush_every_);
}

TrajectoryWriter::TrajectoryWriter(const std::string& path, std::size_t flush_every)
    : TrajectoryWriter(H5File::create(path), flush_every) {
  file_.writeAttribute("format", kTrajectoryFormatName);
  file_.writeAttribute("format_version", kTrajectoryFormatVersion);
  tokens_ = file_.createSequences(kTokensPath, kChunkRows);
  policy_mask_ = file_.createSequences(kPolicyMaskPath, kChunkRows);
  logprobs_flat_ = file_.createExtendible<float>(kLogprobsFlatPath);  // chunks of ~64 KiB
  versions_flat_ = file_.createExtendible<std::int64_t>(kVersionsFlatPath);
  token_offset_ = file_.createExtendible<std::uint64_t>(kTokenOffsetPath, 0, kChunkRows);
  reward_ = file_.createExtendible<double>(kRewardPath, 0, kChunkRows);
  policy_ = file_.createExtendible<std::int32_t>(kPolicyPath, 0, kChunkRows);
  policy_names_ = file_.createStrings(kPolicyNamesPath);
  forEachColumn([&]<class M, class S>(const char* name, M Trajectory::*, Stored<S>) {
    columns_.push_back(file_.createExtendible<S>(name, 0, kChunkRows));
  });
  // The empty tables are on disk before the first row: a crash still leaves a valid file.
  file_.flush();
}

TrajectoryWriter TrajectoryWriter::openForAppend(const std::string& path, std::size_t flush_every) {
  auto file = H5File::openReadWrite(path);
  checkFormat(file, path, false);
  TrajectoryWriter writer(std::move(file), flush_every);
  const H5File& f = writer.file_;
  writer.tokens_ = f.openDataset(kTokensPath);
  writer.policy_mask_ = f.openDataset(kPolicyMaskPath);
  // An empty append checks the stored type (vlen int32) and changes nothing.
  writer.tokens_.appendSequences({});
  writer.policy_mask_.appendSequences({});
  writer.logprobs_flat_ = openColumn<float>(f, kLogprobsFlatPath);
  writer.versions_flat_ = openColumn<std::int64_t>(f, kVersionsFlatPath);
  writer.token_offset_ = openColumn<std::uint64_t>(f, kTokenOffsetPath);
  writer.reward_ = openColumn<double>(f, kRewardPath);
  writer.policy_ = openColumn<std::int32_t>(f, kPolicyPath);
  writer.policy_names_ = f.openDataset(kPolicyNamesPath);
  forEachColumn([&]<class M, class S>(const char* name, M Trajectory::*, Stored<S>) {
    writer.columns_.push_back(openColumn<S>(f, name));
  });

  // Appending to datasets that do not line up would pair later rows wrongly for good.
  std::vector<const H5Dataset*> per_row = {&writer.tokens_, &writer.policy_mask_, &writer.token_offset_,
                                           &writer.reward_, &writer.policy_};
  for (const auto& column : writer.columns_) per_row.push_back(&column);
  const std::uint64_t rows = writer.tokens_.rows();
  for (const H5Dataset* dataset : per_row) {
    if (dataset->rows() != rows) {
      ASTRA_H5_FAIL(
          fmt::format("trajectory file '{}': /{} has {} rows but {} has {} (a crash during a flush?); "
                      "cannot append to it",
                      path, kTokensPath, rows, dataset->name(), dataset->rows()));
    }
  }
  writer.rows_ = rows;
  writer.flat_size_ = writer.logprobs_flat_.rows();
  if (writer.versions_flat_.rows() != writer.flat_size_) {
    ASTRA_H5_FAIL(
        fmt::format("trajectory file '{}': /{} has {} values but /{} has {} (a crash during a flush?); "
                    "cannot append to it",
                    path, kLogprobsFlatPath, writer.flat_size_, kVersionsFlatPath, writer.versions_flat_.rows()));
  }
  writer.names_ = writer.policy_names_.readStrings();
  writer.names_written_ = writer.names_.size();
  for (std::size_t i = 0; i < writer.names_.size(); ++i) {
    writer.name_index_.emplace(writer.names_[i], static_cast<std::int32_t>(i));
  }
  return writer;
}

TrajectoryWriter::~TrajectoryWriter() { closeQuietly(); }

TrajectoryWriter& TrajectoryWriter::operator=(TrajectoryWriter&& other) noexcept {
  if (this != &other) {
    closeQuietly();
    file_ = std::move(other.file_);
    tokens_ = std::move(other.tokens_);
    policy_mask_ = std::move(other.policy_mask_);
    logprobs_flat_ = std::move(other.logprobs_flat_);
    versions_flat_ = std::move(other.versions_flat_);
    token_offset_ = std::move(other.token_offset_);
    reward_ = std::move(other.reward_);
    policy_ = std::move(other.policy_);
    policy_names_ = std::move(other.policy_names_);
    columns_ = std::move(other.columns_);
    buffer_ = std::move(other.buffer_);
    names_ = std::move(other.names_);
    name_index_ = std::move(other.name_index_);
    names_written_ = other.names_written_;
    flat_size_ = other.flat_size_;
    flush_every_ = other.flush_every_;
    clock_ = other.clock_;
    rows_ = other.rows_;
    failed_ = other.failed_;
    other.buffer_.clear();
  }
  return *this;
}

void TrajectoryWriter::closeQuietly() noexcept {
  if (!file_.valid()) return;  // moved from
  try {
    flush();
  } catch (const std::exception& e) {
    try {
      spdlog::error("trajectory writer {}: {} buffered trajectories lost: {}", file_.path(), buffer_.size(), e.what());
    } catch (...) {  // logging failed too: nothing left to do in a destructor
    }
  }
}

void TrajectoryWriter::append(const Trajectory& trajectory) {
  if (failed_) {
    throw Error(fmt::format("trajectory writer {}: an earlier write failed, no more rows are accepted", path()));
  }
  const std::size_t n = trajectory.tokens.size();
  if (trajectory.behav_logprobs.size() != n || trajectory.policy_mask.size() != n) {
    throw Error(
        fmt::format("trajectory writer {}: task {} has {} tokens, {} behav_logprobs and {} policy_mask "
                    "values; the file stores one of each per token",
                    path(), trajectory.task_id, n, trajectory.behav_logprobs.size(), trajectory.policy_mask.size()));
  }
  if (trajectory.policy.find('\0') != std::string::npos) {
    throw Error(fmt::format("trajectory writer {}: task {} has a policy name containing a NUL byte", path(),
                            trajectory.task_id));
  }
  buffer_.push_back(trajectory);
  if (buffer_.size() >= flush_every_ || clock_.due()) flush();
}

void TrajectoryWriter::flush() {
  if (!buffer_.empty()) {
    if (failed_) {
      throw Error(fmt::format("trajectory writer {}: an earlier write failed", path()));
    }
    try {
      writeBuffer();
    } catch (...) {
      failed_ = true;  // the datasets may no longer line up: appending more would pair rows wrongly
      throw;
    }
    buffer_.clear();
  }
  file_.flush();
  clock_.flushed();
}

std::int32_t TrajectoryWriter::policyIndex(const std::string& name) {
  const auto [it, inserted] = name_index_.try_emplace(name, static_cast<std::int32_t>(names_.size()));
  if (inserted) names_.push_back(name);
  return it->second;
}

// Names first, then the flat log-probs, then the per-row datasets: a crash part-way leaves only
// unreferenced extras and rows missing from the later datasets, which the reader drops.
void TrajectoryWriter::writeBuffer() {
  std::vector<std::int32_t> policy;
  Sequences tokens, mask;
  std::vector<float> flat;
  std::vector<std::int64_t> versions;
  std::vector<std::uint64_t> offsets;
  std::vector<double> reward;
  policy.reserve(buffer_.size());
  tokens.reserve(buffer_.size());
  mask.reserve(buffer_.size());
  offsets.reserve(buffer_.size());
  reward.reserve(buffer_.size());
  std::uint64_t at = flat_size_;
  for (auto& t : buffer_) {
    policy.push_back(policyIndex(t.policy));
    offsets.push_back(at);
    at += t.tokens.size();
    flat.insert(flat.end(), t.behav_logprobs.begin(), t.behav_logprobs.end());
    const auto per_token = tokenVersions(t);
    versions.insert(versions.end(), per_token.begin(), per_token.end());
    mask.emplace_back(t.policy_mask.begin(), t.policy_mask.end());
    tokens.push_back(std::move(t.tokens));  // the buffer is cleared (or abandoned) after this
    reward.push_back(t.rewards.empty() ? std::numeric_limits<double>::quiet_NaN() : t.rewards.front());
  }

  if (names_.size() > names_written_) {
    policy_names_.appendStrings(std::vector<std::string>(names_.begin() + names_written_, names_.end()));
    names_written_ = names_.size();
  }
  logprobs_flat_.appendRows(flat);
  versions_flat_.appendRows(versions);
  flat_size_ = at;
  tokens_.appendSequences(tokens);
  policy_mask_.appendSequences(mask);
  token_offset_.appendRows(offsets);
  reward_.appendRows(reward);
  policy_.appendRows(policy);
  std::size_t column = 0;
  forEachColumn([&]<class M, class S>(const char*, M Trajectory::*member, Stored<S>) {
    std::vector<S> values;
    values.reserve(buffer_.size());
    for (const auto& t : buffer_) values.push_back(static_cast<S>(t.*member));
    columns_[column++].appendRows(values);
  });
  rows_ += buffer_.size();
}

// ---- reading -------------------------------------------------------------------------------

std::vector<Trajectory> readTrajectories(const std::string& path) {
  const auto file = H5File::openReadOnly(path);
  const bool has_versions = checkFormat(file, path, true) > kFirstFormatVersion;
  auto tokens = file.openDataset(kTokensPath).readSequences();
  const auto mask = file.openDataset(kPolicyMaskPath).readSequences();
  const auto flat = file.readVector<float>(kLogprobsFlatPath);
  const auto versions = has_versions ? file.readVector<std::int64_t>(kVersionsFlatPath) : std::vector<std::int64_t>{};
  const auto offsets = file.readVector<std::uint64_t>(kTokenOffsetPath);
  const auto reward = file.readVector<double>(kRewardPath);
  const auto policy = file.readVector<std::int32_t>(kPolicyPath);
  const auto names = file.openDataset(kPolicyNamesPath).readStrings();

  // Keep the rows every per-row dataset has (they differ only after a crash during a flush).
  std::vector<Trajectory> out(tokens.size());
  std::size_t rows = out.size();
  std::size_t longest = out.size();
  const auto count = [&](std::size_t n) {
    rows = std::min(rows, n);
    longest = std::max(longest, n);
  };
  for (const std::size_t n : {mask.size(), offsets.size(), reward.size(), policy.size()}) count(n);
  forEachColumn([&]<class M, class S>(const char* name, M Trajectory::*member, Stored<S>) {
    const auto values = file.readVector<S>(name);
    count(values.size());
    for (std::size_t i = 0; i < std::min(values.size(), out.size()); ++i) {
      out[i].*member = narrowed<M>(values[i], name, i, path);
    }
  });
  if (rows != longest) {
    spdlog::warn("trajectory file {}: datasets hold between {} and {} rows (a crash during a flush?); reading {}", path,
                 rows, longest, rows);
  }
  out.resize(rows);

  for (std::size_t i = 0; i < rows; ++i) {
    auto& t = out[i];
    const std::size_t n = tokens[i].size();
    if (mask[i].size() != n) {
      ASTRA_H5_FAIL(fmt::format("trajectory file '{}': row {} has {} tokens but {} policy_mask values", path, i, n,
                                mask[i].size()));
    }
    if (offsets[i] > flat.size() || n > flat.size() - offsets[i]) {
      ASTRA_H5_FAIL(fmt::format("trajectory file '{}': row {} takes log-probs [{}, {}) of a {}-value /{}", path, i,
                                offsets[i], offsets[i] + n, flat.size(), kLogprobsFlatPath));
    }
    if (policy[i] < 0 || static_cast<std::size_t>(policy[i]) >= names.size()) {
      ASTRA_H5_FAIL(fmt::format("trajectory file '{}': row {} has policy index {} of {} names", path, i, policy[i],
                                names.size()));
    }
    t.tokens = std::move(tokens[i]);
    t.policy_mask.reserve(n);
    for (const std::int32_t m : mask[i]) t.policy_mask.push_back(narrowed<std::uint8_t>(m, kPolicyMaskPath, i, path));
    const auto first = flat.begin() + static_cast<std::ptrdiff_t>(offsets[i]);
    t.behav_logprobs.assign(first, first + static_cast<std::ptrdiff_t>(n));
    if (has_versions) {
      if (offsets[i] > versions.size() || n > versions.size() - offsets[i]) {
        ASTRA_H5_FAIL(fmt::format("trajectory file '{}': row {} takes versions [{}, {}) of a {}-value /{}", path, i,
                                  offsets[i], offsets[i] + n, versions.size(), kVersionsFlatPath));
      }
      const auto v = versions.begin() + static_cast<std::ptrdiff_t>(offsets[i]);
      t.version_runs = versionRunsOf({v, v + static_cast<std::ptrdiff_t>(n)});
      compactVersionRuns(t);
    }
    t.rewards = {reward[i]};
    t.policy = names[static_cast<std::size_t>(policy[i])];
  }
  return out;
}

}  // namespace astraflow::io
