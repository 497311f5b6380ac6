// Linked into every program that links the `astraflow` target (its object is an INTERFACE
// source, see CMakeLists.txt): registers the config checks of the modules above core before
// main, so a config parsed anywhere is checked against the real environment and plug-in
// registries.
#include "astraflow/dataflow/plugins.hpp"
#include "astraflow/tasks/environment.hpp"

namespace {

const bool kConfigChecksRegistered = [] {
  astraflow::registerTaskConfigChecks();
  astraflow::registerDataflowConfigChecks();
  return true;
}();

}  // namespace
