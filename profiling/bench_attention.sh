#!/usr/bin/env bash
# Forward + backward of one row through blocks of Qwen3-0.6B's attention shape (bench_attention:
# 16 query heads of 128 on 8 KV heads, hidden 1024, MLP 3072, float32, activation checkpointing)
# at several lengths, through the explicit mask (the path before the typed attention input), the
# causal kernel with no mask (right-padded rows) and per-span attention (packed lines). Each run is a
# process of its own; prints seconds and peak memory above the model's side by side, with ratios.
# A run that fails (memory) or takes longer than the limit prints its reason instead.
#   profiling/bench_attention.sh [lengths="2048 8192 16384 32768"] [layers=1] [threads=2] [limit_s=900]
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
lengths=${1:-2048 8192 16384 32768}
layers=${2:-1}
threads=${3:-2}
limit=${4:-900}
bin=$here/build/bin/bench_attention
figure() {  # figure <T> <form>: "seconds GiB" or the failure
  local line
  line=$(timeout "$limit" "$bin" "$1" "$layers" "$2" "$threads" 2>&1 | tail -n 1)
  case $line in
    '{'*) python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("%.2f %.3f" % (d["seconds"], d["peak_bytes_above_model"]/2**30))' "$line" ;;
    *) echo "failed ${line:0:60}" ;;
  esac
}
printf '%8s | %22s | %22s | %22s | %s\n' tokens "mask: s, GiB" "causal: s, GiB" "spans: s, GiB" "mask/causal (time, memory)"
for T in $lengths; do
  read -r ms mg <<<"$(figure "$T" mask)"
  read -r cs cg <<<"$(figure "$T" causal)"
  read -r ss sg <<<"$(figure "$T" spans)"
  ratio=$(python3 -c 'import sys
try: print("%.2fx, %.1fx" % (float(sys.argv[1])/float(sys.argv[3]), float(sys.argv[2])/max(float(sys.argv[4]),1e-9)))
except ValueError: print("-")' "$ms" "$mg" "$cs" "$cg")
  printf '%8s | %10s %11s | %10s %11s | %10s %11s | %s\n' "$T" "$ms" "$mg" "$cs" "$cg" "$ss" "$sg" "$ratio"
done
