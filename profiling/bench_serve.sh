#!/usr/bin/env bash
# The http backend against the engine, and `astraflow serve` under 1/8/32 clients
# (profiling/bench_serve.cpp), on a model folder made by init-model: the quickstart's shape by
# default (hidden 96, 3 blocks), or `tiny-qwen3` with PRESET=tiny-qwen3.
#   profiling/bench_serve.sh [prompts] [new_tokens] [seconds_per_level]
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "${PRESET:-}" = tiny-qwen3 ]; then
  build/bin/astraflow init-model "$work/model" --preset tiny-qwen3 --seed 1 >/dev/null
else
  build/bin/astraflow init-model "$work/model" --hidden-size 96 --layers 3 --heads 4 --kv-heads 2 --head-dim 24 \
    --intermediate-size 256 --max-positions 128 --seed 1 >/dev/null
fi
build/bin/bench_serve "$work/model" "$@"
