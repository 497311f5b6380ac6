#!/usr/bin/env bash
# The quickstart trained twice for the same wall time from the same warm start: rollouts from the
# in-process engine, then from `astraflow serve` through the http backend (SGLang's /generate).
# Prints, side by side: versions, held-out accuracy start -> end, rollout tokens/s, trainer wait.
#   profiling/bench_http_rollout.sh [seconds per run, default 120]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
seconds=${1:-120}
bin=build/bin/astraflow
out=runs/bench_http
rm -rf "$out"
mkdir -p "$out"
[ -f runs/quickstart/sft.h5 ] || "$bin" sft configs/quickstart.yaml >/dev/null
"$bin" export-hf runs/quickstart/sft.h5 "$out/served" >/dev/null
common=(--set "run.max_wall_seconds=$seconds" --set run.init_checkpoint=runs/quickstart/sft.h5)
mpirun -np 4 "$bin" run configs/quickstart.yaml "${common[@]}" --set "run.output_dir=$out/engine" >"$out/engine.log" 2>&1
"$bin" serve "$out/served" --port 0 --port-file "$out/port" --max-batch 256 >"$out/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do [ -s "$out/port" ] && break; sleep 0.1; done
url="http://127.0.0.1:$(cat "$out/port")"
mpirun -np 4 "$bin" run configs/quickstart.yaml "${common[@]}" --set "run.output_dir=$out/http" \
  --set "layout.2.backend={kind: http, url: \"$url\", max_in_flight: 128, weights_dir: $out/weights}" >"$out/http.log" 2>&1
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print(f"{'':8} {'versions':>9} {'accuracy start -> end':>24} {'rollout tok/s':>14} {'trainer wait':>13}")
for name in ("engine", "http"):
    s = json.load(open(f"{out}/{name}/summary.json"))
    print(f"{name:8} {s['versions']:>9} {s['eval_accuracy_start']:>10.3f} -> {s['eval_accuracy_end']:.3f} "
          f"({100 * (s['eval_accuracy_end'] - s['eval_accuracy_start']):+.1f}) {s['rollout_tokens_per_s']:>14.0f} "
          f"{s['trainer_wait_fraction']:>13.3f}")
PY
