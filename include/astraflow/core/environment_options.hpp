#pragma once
// Options of the built-in environments (config section `environment`). A plain struct in core
// so the config parser needs nothing of the tasks module that implements the environments.
#include <cstdint>
#include <string>

namespace astraflow {

// Options of the built-in environments (config section `environment`, docs/configuration.md).
struct EnvironmentOptions {
  std::string name = "arithmetic";
  // arithmetic
  int digits = 2;                // operands have 1..digits digits
  std::string operators = "+-";  // any of + - *
  // search
  int corpus_size = 64;           // key–value facts generated from the seed
  int max_turns = 4;              // agent turns per episode
  std::uint64_t corpus_seed = 7;  // the corpus is a function of this seed
};

}  // namespace astraflow
