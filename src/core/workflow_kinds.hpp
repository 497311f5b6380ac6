#pragma once
// The multi-agent workflows' fixed parts (src/core/workflow_kinds.cpp): each kind's roles, their
// order, the reward rules each role allows and the default texts; private to src/core.
#include <map>
#include <string>
#include <vector>

#include "astraflow/core/config.hpp"

namespace astraflow::detail {

struct KindSpec {
  std::vector<std::string> roles;                           // in the only order the kind runs them
  std::map<std::string, std::vector<std::string>> rewards;  // allowed rules per role, default first
  std::map<std::string, std::string> context;               // default templates (arithmetic)
  bool loops;                                               // needs a turn limit
  bool arithmetic;                                          // runs on the arithmetic environment
  bool code;                                                // runs chat-formatted on a code dataset
  bool text = false;  // runs chat-formatted on a text dataset (a `dataset` whose reward is not `code`)
  // The chat workflows' defaults: each role's user message and system message, the solver's follow-up.
  std::map<std::string, std::string> chat_context = {}, chat_system = {};
  std::string chat_followup = {};
};

// The multi-agent kinds (every WorkflowKind but Single).
const std::map<WorkflowKind, KindSpec>& workflowKinds();

// The names a template's {name} may take.
const std::vector<std::string>& templatePlaceholders();

}  // namespace astraflow::detail
