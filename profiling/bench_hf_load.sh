#!/usr/bin/env bash
# Loading a float32 Hugging Face folder, side by side in one run: astraflow's loader mapped
# (HfLoad::Map, what a freshly built model gets) and copied (HfLoad::Copy), build/bin/bench_hf_load,
# against transformers' from_pretrained into float32, each with the files in the page cache, one
# thread. Prints each one's load time and the resident set it added (VmRSS after the load, the
# model alive, minus before), then the ratios.
#   profiling/bench_hf_load.sh [preset=qwen3-0.6b]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-qwen3-0.6b}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
build/bin/astraflow init-model "$dir/m" --preset "$preset" --dtype float32 --seed 1 > /dev/null
ours=$(build/bin/bench_hf_load "$dir/m")
echo "$ours"
theirs=$(.venv/bin/python - "$dir/m" <<'PY' 2>/dev/null
import sys, time
import torch
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
torch.set_num_threads(1)
from transformers import AutoModelForCausalLM
before, t = rss(), time.time()
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
print(f"{time.time() - t:.2f} {(rss() - before) / 1e6:.0f}")
PY
)
read -r hf_s hf_mb <<< "$theirs"
map_s=$(awk '/HfLoad::Map/ {for (i = 1; i <= NF; i++) if ($i == "s") {print $(i - 1); exit}}' <<< "$ours")
map_mb=$(awk '/HfLoad::Map/ {for (i = 1; i <= NF; i++) if ($i == "MB") {v = $(i - 1); gsub(/\+/, "", v); print v; exit}}' \
  <<< "$ours")
printf 'transformers from_pretrained       %8.2f s   resident +%6.0f MB\n' "$hf_s" "$hf_mb"
awk -v a="$map_s" -v b="$hf_s" -v c="$map_mb" -v d="$hf_mb" \
  'BEGIN {printf "ratio (Map / transformers)         %8.2f time, %.2f resident\n", a / b, c / d}'
