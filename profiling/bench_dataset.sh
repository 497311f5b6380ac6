#!/usr/bin/env bash
# What a JSONL prompt dataset costs the dataflow rank (docs/tasks.md, docs/performance.md):
# build/bin/bench_dataset writes a LINES-line file and measures `wc -l`, PromptDataset::load and
# the per-prompt admission path (next id, chat rendering, metadata) side by side in one run.
#   profiling/bench_dataset.sh [LINES] [PROMPTS]     (defaults 1000000 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
build/bin/bench_dataset "${1:-1000000}" "${2:-200000}"
