#!/usr/bin/env bash
# The quickstart trained with rollouts from a real vLLM against the in-process engine, per seed,
# for the same wall time from the same warm start (issue 58's learning figure): one rollout rank
# each (a launched vLLM per rank would be two 7 GB servers on this machine), the vLLM launched by
# the pool (backend.launch; its start, 40-90 s here, is inside the run's wall time, as a user pays
# it). Prints per run and as mean ± spread over the seeds: versions, held-out accuracy start ->
# end, rollout tokens/s, trainer wait, failed episodes, and the books (produced = accepted +
# filtered + stale).
#   profiling/vllm_quickstart.sh [seconds per run, default 180] [seeds, default 1 2 3]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
seconds=${1:-180}
shift || true
if [ $# -gt 0 ]; then seeds=("$@"); else seeds=(1 2 3); fi
bin=$PWD/build/bin/astraflow
vpython=${ASTRAFLOW_VLLM_PYTHON:-$PWD/.venv-vllm/bin/python}
[ -x "$vpython" ] || { echo "no vLLM at $vpython (ASTRAFLOW_REQUIREMENTS=test bash scripts/setup.sh makes it)"; exit 1; }
out=runs/vllm_quickstart
rm -rf "$out"
mkdir -p "$out"
# vLLM's CPU attention takes head sizes of 32 and more (the quickstart's 96/4 = 24 crashes its
# engine at the first request): both sides use 3 heads of 32 (one KV head), warm-started alike.
model=(--set "policies.0.model.heads=3" --set "policies.0.model.kv_heads=1")
warm=$out/sft.h5
"$bin" sft configs/quickstart.yaml "${model[@]}" --set "sft.checkpoint=$warm" >"$out/sft.log" 2>&1
launch="{command: [\"$vpython\", -m, vllm.entrypoints.openai.api_server, --dtype, float32, --max-model-len, \"32\"], env: {VLLM_CPU_KVCACHE_SPACE: \"1\"}, start_seconds: 600}"
for seed in "${seeds[@]}"; do
  common=(--set "run.max_wall_seconds=$seconds" --set run.init_checkpoint=$warm --set "run.seed=$seed"
          --set layout.2.ranks=1 "${model[@]}")
  mpirun -np 3 "$bin" run configs/quickstart.yaml "${common[@]}" --set "run.output_dir=$out/engine$seed" \
    >"$out/engine$seed.log" 2>&1
  mpirun -np 3 "$bin" run configs/quickstart.yaml "${common[@]}" --set "run.output_dir=$out/vllm$seed" \
    --set "layout.2.backend={kind: http, api: vllm, max_in_flight: 128, weights_dir: $out/w$seed, launch: $launch}" \
    >"$out/vllm$seed.log" 2>&1
done
python3 - "$out" "${seeds[@]}" <<'PY'
import json, statistics, sys
out, seeds = sys.argv[1], sys.argv[2:]
rows = {}
print(f"{'run':8} {'versions':>8} {'accuracy start -> end':>22} {'tok/s':>7} {'wait':>6} {'failed':>6} {'books':>6}")
for name in ("engine", "vllm"):
    for seed in seeds:
        s = json.load(open(f"{out}/{name}{seed}/summary.json"))
        rollout = [r for r in s["ranks"] if r["role"] == "rollout"]
        books = s["produced"] == s["accepted"] + s["filtered"] + s["stale_dropped"]
        failed = sum(r["failed_episodes"] for r in rollout)
        rows.setdefault(name, []).append((s["versions"], s["eval_accuracy_start"], s["eval_accuracy_end"],
                                          s["rollout_tokens_per_s"], s["trainer_wait_fraction"]))
        print(f"{name + seed:8} {s['versions']:>8} {s['eval_accuracy_start']:>10.3f} -> {s['eval_accuracy_end']:.3f} "
              f"{s['rollout_tokens_per_s']:>7.0f} {s['trainer_wait_fraction']:>6.3f} {failed:>6} {str(books):>6}")
def ms(values):
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values) if len(values) > 1 else 0:.3f}"
for name, r in rows.items():
    print(f"{name}: versions {ms([x[0] for x in r])}, accuracy {ms([x[1] for x in r])} -> {ms([x[2] for x in r])}, "
          f"gain {ms([x[2] - x[1] for x in r])}, tok/s {ms([x[3] for x in r])}, wait {ms([x[4] for x in r])}")
PY
