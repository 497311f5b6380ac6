// TrajectoryWriter: exact round trips across flushes, NaN rewards, reopening for append, files
// cut short by a crash, refused inputs, per-token versions and readability by the real h5dump
// and h5py.
#include <gtest/gtest.h>
#include <hdf5.h>  // only to remove a dataset, making a file as format version 1 wrote it

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "astraflow/core/records.hpp"
#include "astraflow/io/h5.hpp"
#include "astraflow/io/trajectory_writer.hpp"
#include "io/h5dump.hpp"
#include "io/temp_dir.hpp"

namespace astraflow::io {
namespace {

using test::TempDir;

// A trajectory whose every field depends on i, with lengths 0..37 and the extremes of each
// stored type. It has exactly one finite reward, the part of rewards the file keeps.
Trajectory makeTrajectory(int i) {
  static const char* const kPolicies[] = {"actor", "critic", "réviseur"};
  constexpr std::uint32_t kMaxU32 = std::numeric_limits<std::uint32_t>::max();
  Trajectory t;
  t.task_id = 1'000'000'000'000ULL + static_cast<std::uint64_t>(i);
  t.problem_id = i % 5 == 0 ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(i) * 7;
  t.group_id = static_cast<std::uint64_t>(i / 8);
  t.group_index = i % 11 == 0 ? kMaxU32 : static_cast<std::uint32_t>(i % 8);
  t.policy = kPolicies[(i / 3) % 3];
  t.producer_rank = i % 13 == 0 ? -1 : i % 4;
  t.pool_uid = i % 17 == 0 ? kMaxU32 : static_cast<std::uint32_t>(i * 3);
  t.weight_version_min = i % 9 == 0 ? std::numeric_limits<std::int64_t>::min() : i / 10;
  t.weight_version_max = i / 10 + 2;
  const int length = (i * 7) % 38;  // 0 every 38 rows
  for (int k = 0; k < length; ++k) {
    t.tokens.push_back(k == 0 && i % 2 == 0 ? std::numeric_limits<std::int32_t>::min() : (i * 31 + k) % 50'000);
    t.behav_logprobs.push_back(k == 1 ? -std::numeric_limits<float>::infinity() : -0.001f * static_cast<float>(i + k));
    t.policy_mask.push_back(static_cast<std::uint8_t>((i + k) % 3 != 0));
  }
  t.rewards = {i % 10 == 0 ? -1.0 : 0.25 * i};
  t.t_queued = 0.5 * i;
  t.t_started = 0.5 * i + 1e-9;
  t.t_finished = 0.5 * i + 0.125;
  t.turns = i % 19 == 0 ? kMaxU32 : static_cast<std::uint32_t>(i % 4 + 1);
  t.status = static_cast<std::uint8_t>(i % 4);
  return t;
}

TEST(TrajectoryWriter, ThousandTrajectoriesRoundTripExactly) {
  TempDir dir;
  const auto path = dir.file("trajectories.h5");
  std::vector<Trajectory> expected;
  {
    TrajectoryWriter writer(path, 64);
    for (int i = 0; i < 1000; ++i) {
      expected.push_back(makeTrajectory(i));
      writer.append(expected.back());
      // Appends happen exactly at multiples of flush_every.
      EXPECT_EQ(writer.rowsWritten(), static_cast<std::size_t>((i + 1) / 64 * 64));
    }
    EXPECT_EQ(writer.rowsBuffered(), 1000u % 64);  // written by the destructor
  }
  ASSERT_EQ(expected[0].tokens.size(), 0u);
  const auto got = readTrajectories(path);
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], expected[i]) << "row " << i;

  const auto file = H5File::openReadOnly(path);
  EXPECT_EQ(file.readStringAttribute("format"), "astraflow-trajectories");
  EXPECT_EQ(file.readInt64Attribute("format_version"), 2);
  EXPECT_EQ(file.openDataset("policy_names").readStrings(), (std::vector<std::string>{"actor", "critic", "réviseur"}));
  for (const char* name : {"tokens", "policy_mask", "token_offset", "reward", "policy", "task_id", "status"}) {
    EXPECT_EQ(file.openDataset(name).rows(), 1000u) << name;
  }
  std::size_t total_tokens = 0;
  for (const auto& t : expected) total_tokens += t.tokens.size();
  EXPECT_EQ(file.openDataset("behav_logprobs_flat").rows(), total_tokens);
  EXPECT_EQ(file.openDataset("token_versions_flat").rows(), total_tokens);
}

// A trajectory whose sequence moved to new weights part-way (rollout.on_new_version: continue):
// version runs [ctx, v, v+1, ctx, v+1].
Trajectory spanningVersions(int i) {
  Trajectory t = makeTrajectory(i);
  t.tokens.assign(static_cast<std::size_t>(12 + i % 5), 11);
  const std::size_t n = t.tokens.size();
  t.behav_logprobs.assign(n, -0.5f);
  t.policy_mask.assign(n, 1);
  t.policy_mask[0] = t.policy_mask[1] = t.policy_mask[8] = 0;
  t.weight_version_min = 40 + i;
  t.weight_version_max = 41 + i;
  std::vector<std::int64_t> versions(n);
  for (std::size_t k = 0; k < n; ++k) {
    versions[k] = t.policy_mask[k] == 0 ? kContextVersion : k < 5 ? t.weight_version_min : t.weight_version_max;
  }
  t.version_runs = versionRunsOf(versions);
  return t;
}

TEST(TrajectoryWriter, PerTokenVersionsRoundTripAndReadInH5py) {
  TempDir dir;
  const auto path = dir.file("versions.h5");
  std::vector<Trajectory> expected;
  {
    TrajectoryWriter writer(path, 3);
    for (int i = 0; i < 10; ++i) {
      expected.push_back(i % 2 ? spanningVersions(i) : makeTrajectory(i));
      writer.append(expected.back());
    }
  }
  for (std::size_t i = 1; i < expected.size(); i += 2) {
    ASSERT_EQ(expected[i].version_runs.size(), 5u);  // the runs really span two versions
  }
  const auto got = readTrajectories(path);
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], expected[i]) << "row " << i;
    EXPECT_EQ(tokenVersions(got[i]), tokenVersions(expected[i])) << "row " << i;
  }

  // What h5py reads, token by token.
  const char* py = std::getenv("ASTRAFLOW_PYTHON");
  const char* script = std::getenv("ASTRAFLOW_H5PY_REFERENCE");
  ASSERT_TRUE(py && script) << "ASTRAFLOW_PYTHON / ASTRAFLOW_H5PY_REFERENCE are not set (run under ctest)";
  const auto listing = dir.file("h5py.txt");
  ASSERT_EQ(std::system((std::string(py) + " " + script + " " + path + " " + listing).c_str()), 0);
  std::ifstream in(listing);
  for (const auto& t : expected) {
    std::uint64_t task_id = 0;
    std::size_t n = 0;
    ASSERT_TRUE(in >> task_id >> n);
    EXPECT_EQ(task_id, t.task_id);
    ASSERT_EQ(n, t.tokens.size());
    std::vector<std::int64_t> versions(n);
    for (auto& v : versions) ASSERT_TRUE(in >> v);
    EXPECT_EQ(versions, tokenVersions(t)) << "task " << t.task_id;
  }
}

TEST(TrajectoryWriter, FormatVersionOneFilesAreReadWithoutPerTokenVersions) {
  TempDir dir;
  const auto path = dir.file("v1.h5");
  {
    TrajectoryWriter writer(path);
    writer.append(makeTrajectory(3));
  }
  {
    // A file as version 1 wrote it: no /token_versions_flat.
    auto file = H5File::openReadWrite(path);
    file.writeAttribute("format_version", std::int64_t{1});
    ASSERT_GE(H5Ldelete(file.id(), "token_versions_flat", H5P_DEFAULT), 0);
  }
  const auto got = readTrajectories(path);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], makeTrajectory(3));
  try {
    (void)TrajectoryWriter::openForAppend(path);
    FAIL() << "a version-1 file was opened for appending";
  } catch (const H5Error& e) {
    EXPECT_NE(std::string(e.what()).find("format_version 1, this build appends to 2"), std::string::npos) << e.what();
  }
}

TEST(TrajectoryWriter, NanRewardSurvivesAndOnlyTheFirstRewardIsKept) {
  TempDir dir;
  const auto path = dir.file("nan.h5");
  auto nan_reward = makeTrajectory(3);
  nan_reward.rewards = {std::numeric_limits<double>::quiet_NaN()};
  auto no_reward = makeTrajectory(4);
  no_reward.rewards.clear();
  auto two_rewards = makeTrajectory(5);
  two_rewards.rewards = {1.5, -2.5};
  {
    TrajectoryWriter writer(path);
    writer.append(nan_reward);
    writer.append(no_reward);
    writer.append(two_rewards);
  }
  auto got = readTrajectories(path);
  ASSERT_EQ(got.size(), 3u);
  ASSERT_EQ(got[0].rewards.size(), 1u);
  EXPECT_TRUE(std::isnan(got[0].rewards[0]));
  ASSERT_EQ(got[1].rewards.size(), 1u);
  EXPECT_TRUE(std::isnan(got[1].rewards[0]));  // no reward is stored as NaN
  EXPECT_EQ(got[2].rewards, std::vector<double>{1.5});
  // Everything else is intact.
  got[0].rewards = nan_reward.rewards = {};
  got[1].rewards = no_reward.rewards = {};
  two_rewards.rewards = {1.5};
  EXPECT_EQ(got[0], nan_reward);
  EXPECT_EQ(got[1], no_reward);
  EXPECT_EQ(got[2], two_rewards);
}

TEST(TrajectoryWriter, ReopenForAppendKeepsEarlierRows) {
  TempDir dir;
  const auto path = dir.file("resume.h5");
  std::vector<Trajectory> expected;
  {
    TrajectoryWriter writer(path, 4);
    for (int i = 0; i < 10; ++i) {
      expected.push_back(makeTrajectory(i));  // policies actor, critic, réviseur
      writer.append(expected.back());
    }
  }
  {
    auto writer = TrajectoryWriter::openForAppend(path, 4);
    EXPECT_EQ(writer.rowsWritten(), 10u);
    for (int i = 10; i < 15; ++i) {
      auto t = makeTrajectory(i);
      t.policy = i % 2 == 0 ? "critic" : "learner";  // one known name, one new
      expected.push_back(t);
      writer.append(t);
    }
    writer.flush();
    EXPECT_EQ(writer.rowsWritten(), 15u);
  }
  EXPECT_EQ(readTrajectories(path), expected);
  const auto file = H5File::openReadOnly(path);
  EXPECT_EQ(file.openDataset("policy_names").readStrings(),
            (std::vector<std::string>{"actor", "critic", "réviseur", "learner"}));
}

// A crash during a flush can leave some datasets a batch longer than others: the reader keeps
// the rows all of them have, and appending to such a file is refused.
TEST(TrajectoryWriter, RaggedFileIsReadToItsCommonRowsAndNotAppendedTo) {
  TempDir dir;
  const auto path = dir.file("ragged.h5");
  std::vector<Trajectory> expected;
  {
    TrajectoryWriter writer(path);
    for (int i = 1; i < 6; ++i) {
      expected.push_back(makeTrajectory(i));
      writer.append(expected.back());
    }
  }
  {
    const auto file = H5File::openReadWrite(path);
    file.openDataset("tokens").appendSequences({{1, 2, 3}});
    file.openDataset("reward").appendRows(std::vector<double>{9.0});
  }
  EXPECT_EQ(readTrajectories(path), expected);
  try {
    (void)TrajectoryWriter::openForAppend(path);
    FAIL() << "expected an H5Error";
  } catch (const H5Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot append"), std::string::npos) << e.what();
  }
}

TEST(TrajectoryWriter, RefusesWhatTheLayoutCannotHold) {
  TempDir dir;
  const auto path = dir.file("refused.h5");
  TrajectoryWriter writer(path);
  auto short_logprobs = makeTrajectory(2);
  short_logprobs.behav_logprobs.pop_back();
  EXPECT_THROW(writer.append(short_logprobs), Error);
  auto nul_policy = makeTrajectory(2);
  nul_policy.policy = std::string("ac\0tor", 6);
  EXPECT_THROW(writer.append(nul_policy), Error);
  EXPECT_EQ(writer.rowsBuffered(), 0u);

  const auto other = dir.file("other.h5");
  {
    auto file = H5File::create(other);
    file.writeAttribute("format", "astraflow-trace");
  }
  EXPECT_THROW((void)TrajectoryWriter::openForAppend(other), H5Error);
  EXPECT_THROW((void)readTrajectories(other), H5Error);
  EXPECT_THROW((void)TrajectoryWriter::openForAppend(dir.file("missing.h5")), H5Error);
}

// Every dataset of the layout in trajectory_writer.hpp.
constexpr const char* kDatasetNames[] = {"tokens",
                                         "policy_mask",
                                         "behav_logprobs_flat",
                                         "token_versions_flat",
                                         "token_offset",
                                         "reward",
                                         "policy",
                                         "policy_names",
                                         "task_id",
                                         "problem_id",
                                         "group_id",
                                         "group_index",
                                         "weight_version_min",
                                         "weight_version_max",
                                         "producer_rank",
                                         "pool_uid",
                                         "t_queued",
                                         "t_started",
                                         "t_finished",
                                         "turns",
                                         "status"};

TEST(TrajectoryWriter, ReadableByRealH5dump) {
  TempDir dir;
  const auto path = dir.file("dump.h5");
  {
    TrajectoryWriter writer(path, 2);
    for (int i = 0; i < 5; ++i) writer.append(makeTrajectory(i));
  }
  int status = 0;
  const auto output = test::runH5dump(path, &status);
  ASSERT_EQ(status, 0) << "h5dump failed:\n" << output;
  for (const char* name : kDatasetNames) {
    EXPECT_NE(output.find(std::string("DATASET \"") + name + "\""), std::string::npos)
        << "dataset " << name << " missing:\n"
        << output;
  }
  EXPECT_NE(output.find("astraflow-trajectories"), std::string::npos) << output;
  EXPECT_NE(output.find("\"actor\""), std::string::npos) << output;      // variable-length: no padding
  EXPECT_NE(output.find("1000000000004"), std::string::npos) << output;  // task_id of row 4
}

}  // namespace
}  // namespace astraflow::io
