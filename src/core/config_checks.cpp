// configChecks(): the process's one ConfigChecks, a function-local static so that the tasks and dataflow modules can
// register their checks from static initialisers before parseConfig reads them.
#include "astraflow/core/config_checks.hpp"

namespace astraflow {

ConfigChecks& configChecks() {
  static ConfigChecks checks;  // a function-local static: safe to use from other files' static initialisers
  return checks;
}

}  // namespace astraflow
