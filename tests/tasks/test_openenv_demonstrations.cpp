// environment.openenv.demonstrations: the warm start's turns for an OpenEnv environment, checked
// against the example's real server — the demonstrations examples/openenv_guess/demonstrations.py
// writes (binary search played on the environment class offline) win every game they name when
// played through the server, as the warm start plays them — and bad files refused or counted.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/environment.hpp"
#include "tasks/openenv_fixture.hpp"

namespace openenv_tests {

TEST(OpenEnvDemonstrations, TheExamplesDemonstrationsWinTheirGamesOnTheServer) {
  Fixture f = guessGame();
  f.options.openenv.reset_json = R"({"turns": 5})";
  f.options.openenv.observation_field = "prompt";
  const std::filesystem::path script =
      std::filesystem::path(std::getenv("ASTRAFLOW_OPENENV_EXAMPLE")).parent_path() / "demonstrations.py";
  const std::string file = f.dir.file("demos.jsonl");
  ASSERT_EQ(std::system((std::string(std::getenv("ASTRAFLOW_PYTHON")) + " " + script.string() + " --out " + file +
                         " --games 24 --high 16 --turns 5")
                            .c_str()),
            0);

  // Without demonstrations an OpenEnv environment has no reference turns.
  auto plain = makeEnvironment(f.options);
  plain->reset(3);
  EXPECT_TRUE(plain->referenceActions().empty());
  EXPECT_EQ(plain->referenceId(7), plain->trainingId(7));

  f.options.openenv.demonstrations = file;
  auto env = makeEnvironment(f.options);
  EXPECT_TRUE(env->referenceActions().empty()) << "no game before the first reset";
  std::vector<std::unique_ptr<Environment>> players;
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t k = 0; k < 24; ++k) {
    const std::uint64_t seed = env->referenceId(k);
    EXPECT_EQ(seed, k);  // the file's seeds, in order
    env->reset(seed);
    const std::vector<std::string> actions = env->referenceActions();
    ASSERT_FALSE(actions.empty()) << "seed " << seed;
    StepResult last;
    for (std::size_t t = 0; t < actions.size(); ++t) {
      last = env->step(actions[t]);
      EXPECT_EQ(last.done, t + 1 == actions.size()) << "seed " << seed << " turn " << t;
    }
    EXPECT_EQ(last.reason, "correct") << "seed " << seed;
    EXPECT_EQ(last.reward, 1.0);
    players.push_back(makeEnvironment(f.options));
    seeds.push_back(seed);
  }
  EXPECT_EQ(env->referenceId(24), 0U);  // cycled
  // The demonstrations' last guesses are the numbers the server's games hold (played live).
  const std::vector<int> found = playAll(players, seeds);
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    env->reset(seeds[i]);
    EXPECT_EQ(std::stoi(env->referenceActions().back()), found[i]) << "seed " << seeds[i];
  }
}

TEST(OpenEnvDemonstrations, BadRowsAreSkippedAndAFileWithoutAUsableRowIsAnError) {
  Fixture f = guessGame();
  f.options.openenv.eval_seed_start = 1000;
  const std::string file = f.dir.file("mixed.jsonl");
  std::ofstream(file) << "{\"seed\": 5, \"actions\": [\"8\", \"4\"]}\n"
                      << "\n"
                      << "{\"seed\": 1000, \"actions\": [\"8\"]}\n"  // held out
                      << "{\"seed\": 5, \"actions\": [\"9\"]}\n"     // again
                      << "{\"seed\": 6, \"actions\": [8]}\n"         // not a string
                      << "{\"seed\": 7, \"actions\": []}\n"
                      << "{\"seed\": -1, \"actions\": [\"8\"]}\n"
                      << "not json\n"
                      << "{\"seed\": 2, \"actions\": [\"8\", \"12\", \"14\"]}\n";
  f.options.openenv.demonstrations = file;
  auto env = makeEnvironment(f.options);
  EXPECT_EQ(env->referenceId(0), 2U);
  EXPECT_EQ(env->referenceId(1), 5U);
  EXPECT_EQ(env->referenceId(2), 2U);
  env->reset(5);
  EXPECT_EQ(env->referenceActions(), (std::vector<std::string>{"8", "4"}));  // the first row of seed 5
  env->reset(6);
  EXPECT_TRUE(env->referenceActions().empty());

  auto refused = [&](const std::string& path, const std::string& says) {
    f.options.openenv.demonstrations = path;
    try {
      makeEnvironment(f.options)->referenceId(0);
      ADD_FAILURE() << "accepted " << path;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  const std::string bad = f.dir.file("bad.jsonl");
  std::ofstream(bad) << "{\"seed\": 4000, \"actions\": [\"8\"]}\n[1, 2]\n";
  refused(bad, "no usable row (2 lines, 2 bad; first: " + bad + ":1: seed 4000 is held out");
  refused(f.dir.file("absent.jsonl"), "cannot be read");
}

}  // namespace openenv_tests
