// bench_dataset [LINES] [PROMPTS]: what a JSONL prompt dataset costs the dataflow rank
// (docs/tasks.md). Writes LINES rows of word-problem shape to a temporary file, then measures in
// one run, side by side:
//   wc -l          the file read once by `wc -l` (the floor: reading the bytes);
//   load           PromptDataset::load — read, parse, validate, hash and dedup every line (once
//                  per process, at the start of a run);
//   admission      PROMPTS prompts as the dataflow rank admits them: the next training id, reset()
//                  (renders the row with the chat template) and the row's metadata for curators.
// Prints one JSON line: the seconds and rates of each and the ratios to `wc -l`.
// profiling/bench_dataset.sh runs it.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "astraflow/tasks/environment.hpp"
#include "astraflow/tasks/prompt_dataset.hpp"
#include "astraflow/text/hf_tokenizer_files.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  const std::size_t lines = argc > 1 ? std::stoull(argv[1]) : 1'000'000;
  const std::size_t prompts = argc > 2 ? std::stoull(argv[2]) : 200'000;
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("astraflow_bench_dataset_{}", ::getpid());
  std::filesystem::create_directories(dir / "model");
  astraflow::writeByteLevelTokenizer(dir / "model");
  const auto file = dir / "train.jsonl";
  {
    std::ofstream out(file);
    for (std::size_t i = 0; i < lines; ++i)
      out << fmt::format(R"({{"prompt": "Ann has {} pens. She buys {} more. How many pens does Ann have now?", )"
                         R"("answer": "{}", "solution": "{}+{}=\\boxed{{{}}}", "op": "+", "difficulty": {}}})",
                         i, i % 97, i + i % 97, i, i % 97, i + i % 97, i % 3)
          << "\n";
  }
  const double bytes = static_cast<double>(std::filesystem::file_size(file));

  auto t0 = Clock::now();
  if (std::system(fmt::format("wc -l {} > /dev/null", file.string()).c_str()) != 0) return 1;
  const double wc = since(t0);

  t0 = Clock::now();
  const auto dataset = astraflow::PromptDataset::load({file}, {});
  const double load = since(t0);

  astraflow::EnvironmentOptions options;
  options.name = "dataset";
  options.dataset.train_files = {file.string()};
  options.dataset.tokenizer_folders = {(dir / "model").string()};
  options.dataset.system_prompt = "Answer with \\boxed{}.";
  auto env = astraflow::makeEnvironment(options);  // loads the file again: its cost is `load`'s
  t0 = Clock::now();
  std::size_t chars = 0;
  for (std::size_t k = 0; k < prompts; ++k) {
    chars += env->reset(env->trainingId(k)).size();
    chars += env->metadata().size();
  }
  const double admission = since(t0);
  std::filesystem::remove_all(dir);

  std::printf(
      "{\"lines\": %zu, \"mb\": %.1f, \"rows\": %zu, \"wc_seconds\": %.3f, \"load_seconds\": %.3f, "
      "\"load_rows_per_s\": %.0f, \"load_vs_wc\": %.1f, \"admission_prompts\": %zu, \"admission_prompts_per_s\": %.0f, "
      "\"admission_us_per_prompt\": %.2f, \"wc_lines_per_s\": %.0f, \"checksum\": %zu}\n",
      lines, bytes / 1e6, dataset.train().size(), wc, load, static_cast<double>(lines) / load, load / wc, prompts,
      static_cast<double>(prompts) / admission, 1e6 * admission / static_cast<double>(prompts),
      static_cast<double>(lines) / wc, chars);
  return 0;
}
