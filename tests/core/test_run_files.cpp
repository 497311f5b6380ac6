// checkpointRoom (core/run_files.hpp): a checkpoint's bytes are reserved before it is written, so
// a limit the filesystem's free-space figure cannot show refuses it — here a file-size limit
// (RLIMIT_FSIZE), which acts on writes as a quota does while the disk has plenty of room.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "astraflow/core/run_files.hpp"
#include "io/temp_dir.hpp"

using namespace astraflow;

namespace {

// Whether this filesystem reserves space with fallocate(2) (the check falls back to the free
// space where it does not, which cannot see a file-size limit).
bool reservesSpace(const std::filesystem::path& dir) {
  const auto probe = dir / "probe";
  const int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY, 0600);
  const bool ok = fd >= 0 && ::fallocate(fd, 0, 0, 4096) == 0;
  if (fd >= 0) ::close(fd);
  std::filesystem::remove(probe);
  return ok;
}

}  // namespace

TEST(CheckpointRoom, AFileSizeLimitRefusesWhatTheFreeSpaceWouldAllow) {
  test::TempDir dir;
  if (!reservesSpace(dir.path())) GTEST_SKIP() << dir.path() << " does not support fallocate";
  const auto folder = dir.path() / "checkpoints";
  EXPECT_TRUE(checkpointRoom(dir.path(), 8 << 20).fits);
  EXPECT_TRUE(std::filesystem::is_directory(folder));  // made when missing

  // Past the limit a write fails with EFBIG and the kernel sends SIGXFSZ, whose default would end
  // this process: checkpointRoom must survive it.
  rlimit old{};
  ::getrlimit(RLIMIT_FSIZE, &old);
  rlimit limit = old;
  limit.rlim_cur = 4 << 20;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  const CheckpointRoom big = checkpointRoom(dir.path(), 64 << 20);
  const CheckpointRoom small = checkpointRoom(dir.path(), 1 << 20);
  ::setrlimit(RLIMIT_FSIZE, &old);
  const auto available = std::filesystem::space(dir.path()).available;
  ASSERT_GT(available, std::uintmax_t{64} << 20) << "the free space alone would have allowed it";
  EXPECT_FALSE(big.fits);
  EXPECT_NE(big.why.find("cannot be reserved in " + folder.string()), std::string::npos) << big.why;
  EXPECT_NE(big.why.find(std::strerror(EFBIG)), std::string::npos) << big.why;
  EXPECT_TRUE(small.fits) << small.why;
  EXPECT_TRUE(std::filesystem::is_empty(folder)) << "the reservation's scratch file is left";
}

TEST(CheckpointRoom, AFolderThatCannotBeMadeRefuses) {
  test::TempDir dir;
  std::ofstream(dir.file("checkpoints")) << "a file where the folder goes";
  const CheckpointRoom room = checkpointRoom(dir.path(), 1024);
  EXPECT_FALSE(room.fits);
  EXPECT_NE(room.why.find("cannot be written"), std::string::npos) << room.why;
}

// run.keep_checkpoints: the newest complete checkpoints stay, older ones go with their partial
// leftovers; protected versions, versions from `protect_from` on, anything newer than the newest
// complete one (being written), best.* and other files are never touched.
TEST(PruneCheckpoints, KeepsTheNewestCompleteAndWhatIsProtected) {
  test::TempDir dir;
  namespace fs = std::filesystem;
  const std::vector<std::string> policies{"solver", "verifier"};
  const auto touch = [](const fs::path& p) { std::ofstream(p) << "x"; };
  const auto complete = [&](std::int64_t v) {
    touch(checkpointPath(dir.path(), v));
    touch(bufferCheckpointPath(dir.path(), v));
    for (const auto& p : policies) touch(trainerCheckpointPath(dir.path(), v, p));
  };
  fs::create_directories(dir.path() / "checkpoints");
  for (const std::int64_t v : {2, 4, 6, 8, 10, 12}) complete(v);
  touch(trainerCheckpointPath(dir.path(), 3, "solver"));   // a partial leftover, old
  touch(trainerCheckpointPath(dir.path(), 14, "solver"));  // being written: newer than every complete one
  touch(dir.path() / "checkpoints" / "best.solver.h5");
  touch(dir.path() / "checkpoints" / "best.json");
  touch(dir.path() / "checkpoints" / "step_notes.txt");

  EXPECT_TRUE(pruneCheckpoints(dir.path(), policies, 0, {}, INT64_MAX).empty());  // 0: keep every one
  EXPECT_EQ(completeCheckpoints(dir.path(), policies).size(), 6u);
  // Keep 2, with version 4 the best and an evaluation of version 8 still running.
  EXPECT_EQ(pruneCheckpoints(dir.path(), policies, 2, {4}, 8), (std::vector<std::int64_t>{2, 3, 6}));
  EXPECT_EQ(completeCheckpoints(dir.path(), policies), (std::vector<std::int64_t>{12, 10, 8, 4}));
  EXPECT_FALSE(fs::exists(trainerCheckpointPath(dir.path(), 3, "solver")));
  EXPECT_FALSE(fs::exists(bufferCheckpointPath(dir.path(), 6)));
  // The evaluation done and 4 no longer the best: keep 1.
  EXPECT_EQ(pruneCheckpoints(dir.path(), policies, 1, {}, INT64_MAX), (std::vector<std::int64_t>{4, 8, 10}));
  EXPECT_EQ(completeCheckpoints(dir.path(), policies), (std::vector<std::int64_t>{12}));
  for (const char* kept : {"step_14.solver.h5", "best.solver.h5", "best.json", "step_notes.txt"})
    EXPECT_TRUE(fs::exists(dir.path() / "checkpoints" / kept)) << kept;
  // Never the only complete one.
  EXPECT_TRUE(pruneCheckpoints(dir.path(), policies, 1, {}, INT64_MAX).empty());
  EXPECT_TRUE(fs::exists(checkpointPath(dir.path(), 12)));
}
