// bench_tokenizer FOLDER STRINGS.jsonl: astraflow's tokenizer.json encoder over every string of
// the file (one JSON string per line), one thread, after one warm-up pass; prints one JSON line
// {"bytes", "tokens", "seconds", "mb_per_s"}. profiling/bench_tokenizer.sh runs it beside the
// `tokenizers` library on the same strings and prints the ratio.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "astraflow/text/hf_tokenizer.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bench_tokenizer FOLDER STRINGS.jsonl\n");
    return 2;
  }
  const auto tokenizer = astraflow::HfTokenizer::load(argv[1]);
  std::vector<std::string> texts;
  std::size_t bytes = 0;
  std::ifstream in(argv[2]);
  for (std::string line; std::getline(in, line);) {
    texts.push_back(nlohmann::json::parse(line).get<std::string>());
    bytes += texts.back().size();
  }
  std::size_t tokens = 0;
  for (const std::string& t : texts) tokens += tokenizer->encode(t).size();  // warm-up: the word cache fills
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    const auto start = std::chrono::steady_clock::now();
    std::size_t n = 0;
    for (const std::string& t : texts) n += tokenizer->encode(t).size();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    tokens = n;
  }
  std::printf("{\"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.4f, \"mb_per_s\": %.2f}\n", bytes, tokens, best,
              static_cast<double>(bytes) / best / 1e6);
  return 0;
}
