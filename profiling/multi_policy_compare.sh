#!/usr/bin/env bash
# Solver + Verifier (two policies trained together) vs the Solver trained alone, with the same
# warm start, seeds, prompt stream and rollout budget (the same number of trainer versions of
# the same batch: 32 groups × 8 episodes per version, so the same number of team episodes as
# single episodes). Reports held-out team accuracy (greedy; the team's answer after the
# verifier's verdicts) vs the solver's own accuracy, per seed and as mean ± spread.
#   profiling/multi_policy_compare.sh [versions] [seeds...]     (default 60 versions, seeds 1 2 3)
# Writes runs/multi_policy/results.csv; docs/multi-policy.md shows a run of it.
set -euo pipefail
cd "$(dirname "$0")/.."
source profiling/sim_lib.sh  # env.sh, and $py: the project's .venv python
sim_need_python
versions=${1:-60}
shift || true
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3)
out=runs/multi_policy
mkdir -p "$out"
team=configs/math_solver_verifier.yaml
single=configs/math_solver_single.yaml
warm=$(build/bin/astraflow warm-start-path "$team")
[ -f "$warm" ] || build/bin/astraflow sft "$team" >/dev/null

echo "variant,seed,versions,accuracy_start,accuracy_end,episodes,generated_tokens,wall_seconds,verifier_eval_reward_end" >"$out/results.csv"
for seed in "${seeds[@]}"; do
  for variant in team single; do
    config=$team; [ "$variant" = single ] && config=$single
    dir="$out/${variant}_s$seed"
    rm -rf "$dir"
    echo "multi_policy_compare: $variant seed $seed" >&2
    mpirun -np "$(build/bin/astraflow layout-size "$config")" build/bin/astraflow run "$config" \
      --set "run.output_dir=$dir" --set "run.seed=$seed" --set "run.versions=$versions" \
      --set run.max_wall_seconds=0 --set "eval.every=$versions" --set "run.init_checkpoint=$warm" \
      --set run.progress_every=20 >"$dir.out" 2>"$dir.err"
    "$py" - "$dir/summary.json" "$variant" "$seed" >>"$out/results.csv" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
tokens = sum(r.get("generated_tokens", 0) for r in s["ranks"] if r["role"] == "rollout")
verifier = s.get("roles", {}).get("verifier", {}).get("eval_reward_end")
print(",".join(str(x) for x in [sys.argv[2], sys.argv[3], s["versions"], s["eval_accuracy_start"],
                                s["eval_accuracy_end"], s["policies"]["solver"]["produced"], int(tokens),
                                round(s["wall_seconds"], 1), "" if verifier is None else verifier]))
PY
  done
done
"$py" - "$out/results.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(f"{'variant':8} {'seeds':>5} {'acc start':>10} {'acc end (mean ± sd)':>22} {'gain':>7} {'episodes':>9} {'tokens':>9} {'wall s':>7}")
for variant in ("single", "team"):
    r = [x for x in rows if x["variant"] == variant]
    if not r:
        continue
    end = [float(x["accuracy_end"]) for x in r]
    start = [float(x["accuracy_start"]) for x in r]
    sd = statistics.stdev(end) if len(end) > 1 else 0.0
    mean = lambda k: statistics.mean(float(x[k]) for x in r)
    print(f"{variant:8} {len(r):5d} {statistics.mean(start):10.3f} {statistics.mean(end):14.3f} ± {sd:5.3f} "
          f"{statistics.mean(end) - statistics.mean(start):+7.3f} {mean('episodes'):9.0f} {mean('generated_tokens'):9.0f} "
          f"{mean('wall_seconds'):7.1f}")
PY
