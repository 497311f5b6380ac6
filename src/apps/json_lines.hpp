#pragma once
// The JSON-lines loop of the stdin commands (tokenize, score, reward): one answer line per input
// line, in order. An input that throws gets {"error": "line N: ..."} in its place — the outputs
// stay aligned with the inputs and the message's bad bytes are replaced, never echoed raw — and
// the exit code is then 3 (else 0), with a count on stderr.
#include <fmt/format.h>

#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

namespace astraflow {

// `answer` turns one parsed input into its output line (without the newline).
inline int answerJsonLines(const char* command,
                           const std::function<std::string(const nlohmann::ordered_json&)>& answer) {
  using json = nlohmann::ordered_json;
  std::ios::sync_with_stdio(false);
  std::string line;
  std::size_t number = 0, bad = 0;
  while (std::getline(std::cin, line)) {
    ++number;
    try {
      std::cout << answer(json::parse(line)) << "\n";
    } catch (const std::exception& e) {
      ++bad;
      std::cout << json{{"error", fmt::format("line {}: {}", number, e.what())}}.dump(-1, ' ', false,
                                                                                      json::error_handler_t::replace)
                << "\n";
    }
  }
  std::cout.flush();
  if (bad == 0) return 0;
  std::fprintf(stderr, "astraflow: %s: %zu of %zu lines could not be answered\n", command, bad, number);
  return 3;
}

}  // namespace astraflow
