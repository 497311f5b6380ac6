#!/usr/bin/env bash
# Peak memory per trainer rank of a Qwen3-0.6B-shaped policy (bench_trainer_memory: random init,
# vocab 151936, hidden 1024, 16 heads of 128, 8 KV heads, MLP 3072, tied embeddings), unsharded
# against ZeRO-1 (trainer.sharding: optimizer) and parameter sharding (parameters), 2 RL steps
# of 2 sequences × 32 tokens per rank. On a 24 GiB machine: all 28 layers at 1 rank unsharded
# and 2 ranks ZeRO-1 (2 unsharded ranks would need ~28 GiB); at 3 ranks the same width with 10
# layers (313 M parameters) under a per-rank memory limit (RLIMIT_DATA, 6.5 GiB) that the
# unsharded group exceeds and the ZeRO-1 group does not; and all 28 layers at 3 ranks under
# 6 GiB per rank, which only parameter sharding fits. A layout that exceeds its limit reports
# the allocation error instead of a figure. Prints one table row per rank and the ratios.
#   profiling/bench_trainer_memory.sh [build dir]
# ASTRAFLOW_BENCH_ROWS=parameters runs the parameter-sharding comparison alone (the others
# include a 2-rank 28-layer ZeRO-1 run that takes ~22 GiB of the machine).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
source "$here/scripts/env.sh"
bin=$build/bin/bench_trainer_memory
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() {  # run <ranks> <sharding> <layers> <limit GiB, 0: none> [steps] [grad_sync]
  mpiexec -n "$1" --oversubscribe "$bin" --sharding "$2" --layers "$3" --limit-gib "$4" --steps "${5:-2}" \
    --grad-sync "${6:-c10d}" --batch 2 --seq 32 2>/dev/null | grep '^{' >>"$out"
}
if [ "${ASTRAFLOW_BENCH_ROWS:-all}" = all ]; then
  run 1 none 28 0
  run 2 optimizer 28 0
  run 1 none 10 0
  run 3 none 10 6.5
  run 3 optimizer 10 6.5
fi
# The limit counts address space. glibc serves the model's block-sized tensors from its heap
# (its mmap threshold rises to 32 MiB), so the whole-model blocks a sharded rank frees at set-up
# would stay counted in the heap's holes; a fixed 1 MiB threshold (for these three rows alike)
# maps them, and freeing them returns them.
export MALLOC_MMAP_THRESHOLD_=1048576
run 3 none 28 6
run 3 optimizer 28 6
run 3 parameters 28 6
unset MALLOC_MMAP_THRESHOLD_
# Step time at the same global batch (2 ranks × 2 sequences), unsharded against ZeRO-1 and
# parameter sharding, over c10d Gloo and over MPI, on 4 layers: the mean of steps 2-5.
for sync in c10d mpi; do
  run 2 none 4 0 5 $sync
  run 2 optimizer 4 0 5 $sync
  run 2 parameters 4 0 5 $sync
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'layers':>6} {'params':>8} {'ranks':>5} {'sharding':>10} {'sync':>5} {'limit':>6} {'rank':>4} {'peak RSS GiB':>12} "
      f"{'RSS after set-up':>16} {'AdamW state GiB':>15} {'weights+grads GiB':>17} {'step s':>7}  result")
for r in sorted(rows, key=lambda r: (-r["layers"], r["ranks"], r["sharding"], r["grad_sync"], r["rank"])):
    step = f"{r['step_seconds'][-1]:.1f}" if r["step_seconds"] else "-"
    print(f"{r['layers']:>6} {r['parameters'] / 1e6:>7.0f}M {r['ranks']:>5} {r['sharding']:>10} {r['grad_sync']:>5} "
          f"{r['limit_gib'] or '-':>6} {r['rank']:>4} {r['peak_rss_gib']:>12.2f} {r['rss_setup_gib']:>16.2f} "
          f"{r['optimizer_state_gib']:>15.3f} {r['weights_grads_gib']:>17.3f} "
          f"{step:>7}  {r['error'][:60] or 'trained'}")
def state(layers, ranks, sharding):
    got = [r["optimizer_state_gib"] for r in rows if (r["layers"], r["ranks"], r["sharding"]) == (layers, ranks, sharding) and not r["error"]]
    return got[0] if got else None
def step(sharding, sync):
    got = [r["step_seconds"][1:] for r in rows
           if (r["layers"], r["ranks"], r["sharding"], r["grad_sync"], r["rank"]) == (4, 2, sharding, sync, 0)]
    return sum(got[0]) / len(got[0]) if got and got[0] else None
for sync in ("c10d", "mpi"):
    plain, zero, fsdp = step("none", sync), step("optimizer", sync), step("parameters", sync)
    if plain and zero and fsdp:
        print(f"4 layers, 2 ranks over {sync}: step seconds unsharded {plain:.2f}, ZeRO-1 {zero:.2f}, "
              f"parameter-sharded {fsdp:.2f}; ZeRO-1 / unsharded {zero / plain:.2f}, parameters / unsharded {fsdp / plain:.2f}")
for layers, ranks in ((28, 2), (10, 3)):
    one, zero = state(layers, 1, "none"), state(layers, ranks, "optimizer")
    if one and zero:
        print(f"{layers} layers: AdamW state per rank, ZeRO-1 at {ranks} ranks / unsharded: {zero / one:.3f} (1/{ranks} = {1 / ranks:.3f})")
for r in rows:
    if (r["layers"], r["ranks"], r["sharding"], r["rank"]) == (28, 3, "parameters", 0) and not r["error"]:
        whole = r["parameters"] * 8 / 2**30  # fp32 weights + gradients, or AdamW's two moments, unsharded
        print(f"28 layers, 3 ranks, parameter-sharded rank 0: weights+grads {r['weights_grads_gib']:.2f} GiB "
              f"= {r['weights_grads_gib'] / whole:.3f} of unsharded, AdamW state {r['optimizer_state_gib']:.2f} GiB "
              f"= {r['optimizer_state_gib'] / whole:.3f} (1/3 = 0.333)")
PY
