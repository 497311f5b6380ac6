#!/usr/bin/env bash
# Peak memory and step time of one trainer rank with log-probs computed in vocabulary chunks
# (trainer.logits_chunk_bytes, default 64 MiB) against whole-vocabulary log-probs (0), side by
# side in one run: bench_trainer_memory's Qwen3-0.6B-shaped policy (vocab 151,936, hidden 1024,
# tied embeddings) with L layers, B sequences of T tokens, S RL steps, one thread; the two are
# alternated R times and each one's best step time and its peak resident set are printed, with
# the ratios. The step's transient is its peak less the resident set after the steps (weights,
# gradients and AdamW state included in both).
#   profiling/bench_logprob_chunks.sh [layers=2] [batch=4] [seq=512] [steps=2] [reps=1] [build dir]
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
layers=${1:-2} batch=${2:-4} seq=${3:-512} steps=${4:-2} reps=${5:-1} build=${6:-$here/build}
source "$here/scripts/env.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _ in $(seq 1 "$reps"); do
  for chunk in 0 67108864; do
    mpiexec -n 1 "$build/bin/bench_trainer_memory" --layers "$layers" --batch "$batch" --seq "$seq" --steps "$steps" \
      --logits-chunk-bytes "$chunk" 2>/dev/null | grep '^{' >>"$out"
  done
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
best = {}
for r in rows:
    if r["error"]:
        print("error:", r["error"]); continue
    k = r["logits_chunk_bytes"]
    step = min(r["step_seconds"])
    b = best.setdefault(k, {"step": step, "peak": r["peak_rss_gib"], "after": r["rss_trained_gib"]})
    b["step"] = min(b["step"], step); b["peak"] = max(b["peak"], r["peak_rss_gib"]); b["after"] = r["rss_trained_gib"]
print(f"{'logits_chunk_bytes':>20} {'best step s':>12} {'peak GiB':>9} {'after GiB':>9} {'transient GiB':>13}")
for k, b in sorted(best.items()):
    print(f"{k:>20} {b['step']:>12.2f} {b['peak']:>9.3f} {b['after']:>9.3f} {b['peak'] - b['after']:>13.3f}")
if 0 in best and 67108864 in best:
    w, c = best[0], best[67108864]
    print(f"chunked / whole: step time {c['step'] / w['step']:.3f}x, peak {c['peak'] / w['peak']:.3f}x, "
          f"transient {(c['peak'] - c['after']) / (w['peak'] - w['after']):.3f}x")
PY
