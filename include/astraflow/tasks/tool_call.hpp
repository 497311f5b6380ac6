#pragma once
// Tool calls in a policy's turn, in the format Qwen-family chat templates teach (Hermes style):
//
//   <tool_call>
//   {"name": "python", "arguments": {"code": "print(6 * 7)"}}
//   </tool_call>
//
// The multi-turn environments (docs/tasks.md) run the call and answer with a "tool" message
// rendered by the policy's chat template; a turn without a tool call is the final answer.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace astraflow {

struct ToolCall {
  std::string name;
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
};

struct ParsedToolCall {
  bool present = false;          // the turn opens a <tool_call>
  std::optional<ToolCall> call;  // when it is well formed
  std::string error;             // why it is not (unclosed, not JSON, no "name", ...)
};

// The first <tool_call>…</tool_call> of `turn`. "arguments" may be an object or a string holding
// one (as OpenAI-style APIs send it); absent, it is {}.
ParsedToolCall parseToolCall(std::string_view turn);

}  // namespace astraflow
