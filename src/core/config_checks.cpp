#include "astraflow/core/config_checks.hpp"

namespace astraflow {

ConfigChecks& configChecks() {
  static ConfigChecks checks;  // a function-local static: safe to use from other files' static initialisers
  return checks;
}

}  // namespace astraflow
