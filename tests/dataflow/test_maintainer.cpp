// elastic.mode external: the maintainer command and the target file. A good answer is a target;
// a failing, hanging or garbage answer, or one outside [g_min, g_max], is refused with a reason
// (the pool keeps its size) — and a hanging command is killed at its timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "dataflow/maintainer.hpp"

using namespace astraflow;
using namespace astraflow::dataflow_detail;

namespace {

ElasticSection withCommand(const std::string& command, double timeout = 5.0) {
  ElasticSection e;
  e.mode = ElasticMode::External;
  e.command = command;
  e.command_timeout_s = timeout;
  e.g_min = 2;
  e.g_max = 8;
  return e;
}

}  // namespace

TEST(Maintainer, AnswersATargetOnItsLastLine) {
  std::string why;
  // The report path arrives as the last argument.
  auto t = askMaintainer(withCommand("f() { echo reading \"$1\"; echo 5; }; f"), "/tmp/report_10.json", why);
  ASSERT_TRUE(t.has_value()) << why;
  EXPECT_EQ(*t, 5);
  t = askMaintainer(withCommand("f() { printf '3\\n\\n  \\n'; }; f"), "r.json", why);
  ASSERT_TRUE(t.has_value()) << why;
  EXPECT_EQ(*t, 3);
}

TEST(Maintainer, FailureGarbageAndOutOfRangeLeaveThePoolAlone) {
  std::string why;
  // (The report path is appended to the command: shell functions take it as $1.)
  EXPECT_FALSE(askMaintainer(withCommand("f() { echo 4; exit 3; }; f"), "r.json", why).has_value());
  EXPECT_NE(why.find("failed (exit 3)"), std::string::npos) << why;
  EXPECT_FALSE(askMaintainer(withCommand("f() { echo four; }; f"), "r.json", why).has_value());
  EXPECT_NE(why.find("not a pool size"), std::string::npos) << why;
  EXPECT_FALSE(askMaintainer(withCommand("f() { echo -1; }; f"), "r.json", why).has_value());
  EXPECT_FALSE(askMaintainer(withCommand("f() { echo 9; }; f"), "r.json", why).has_value());
  EXPECT_NE(why.find("outside [g_min 2, g_max 8]"), std::string::npos) << why;
  EXPECT_FALSE(askMaintainer(withCommand("true"), "r.json", why).has_value());
  EXPECT_FALSE(askMaintainer(withCommand("/nonexistent/maintainer"), "r.json", why).has_value());
}

TEST(Maintainer, AHangingCommandIsKilledAtItsTimeout) {
  std::string why;
  const auto t0 = std::chrono::steady_clock::now();
  // It starts a child that would outlive it; the whole process group goes.
  const auto pid_file = std::filesystem::temp_directory_path() / "astraflow_maintainer_child.pid";
  std::filesystem::remove(pid_file);
  EXPECT_FALSE(
      askMaintainer(withCommand("sleep 30 & echo $! > " + pid_file.string() + "; sleep 30; true", 0.5), "r.json", why)
          .has_value());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 10.0);
  EXPECT_NE(why.find("did not answer within"), std::string::npos) << why;
  long child = 0;
  std::ifstream(pid_file) >> child;
  ASSERT_GT(child, 0);
  // Gone, or a zombie waiting for whoever adopted it: never still sleeping.
  bool alive = true;
  for (int k = 0; k < 100 && alive; ++k) {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string pid, name, state;
    alive = static_cast<bool>(stat >> pid >> name >> state) && state != "Z";
    if (alive) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(alive) << "the maintainer's background child " << child << " outlived the timeout";
  std::filesystem::remove(pid_file);
}

TEST(Maintainer, TheReportPathIsOneArgumentWhateverItHolds) {
  std::string why;
  // A path with spaces and quotes arrives whole as $1 (it is never spliced into the shell text).
  const auto t = askMaintainer(withCommand("f() { [ \"$1\" = \"a b'c.json\" ] && echo 4; }; f"), "a b'c.json", why);
  ASSERT_TRUE(t.has_value()) << why;
  EXPECT_EQ(*t, 4);
}

TEST(Maintainer, TargetFile) {
  ElasticSection e = withCommand("");
  const auto path = (std::filesystem::temp_directory_path() / "astraflow_target_test").string();
  std::filesystem::remove(path);
  std::string why;
  EXPECT_FALSE(readTargetFile(e, path, why).has_value());
  EXPECT_TRUE(why.empty()) << "no file is not an error: " << why;
  std::ofstream(path) << "6\n";
  auto t = readTargetFile(e, path, why);
  ASSERT_TRUE(t.has_value()) << why;
  EXPECT_EQ(*t, 6);
  std::ofstream(path) << "lots\n";
  EXPECT_FALSE(readTargetFile(e, path, why).has_value());
  EXPECT_NE(why.find(path), std::string::npos) << why;
  std::filesystem::remove(path);
}
