#!/usr/bin/env bash
# Data algorithms on the arithmetic task, same prompt stream (seed, 2,000-prompt pool) and the
# same budget of trainer versions, only the dataflow plug-ins differ:
#   vanilla                keep_all, fresh batches
#   ds_r0 … ds_r0.7        zero_advantage (DAPO dynamic sampling) + replay at r ∈ {0, 0.3, 0.5, 0.7}
#   ds_greso_r0.3, …_r0.5  the same + the GRESO curator
# Writes runs/data_algorithms/results.csv and docs/data_algorithms.png (held-out accuracy vs
# rollouts generated). Usage: profiling/data_algorithms.sh [versions]   (default 120; ~10 min)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
versions=${1:-120}
config=configs/quickstart.yaml
out=runs/data_algorithms
mkdir -p "$out"

# The project's .venv python, with matplotlib for the plot (requirements/profiling.txt).
source profiling/sim_lib.sh
sim_need_python

warm=$(build/bin/astraflow warm-start-path "$config")
[ -f "$warm" ] || build/bin/astraflow sft "$config" >/dev/null

declare -A variants=(
  [vanilla]="dataflow.filters=[keep_all]|dataflow.sampler=fresh|dataflow.curators=[]"
  [ds_r0]="dataflow.filters=[zero_advantage]|dataflow.sampler={kind: replay, ratio: 0}|dataflow.curators=[]"
  [ds_r0.3]="dataflow.filters=[zero_advantage]|dataflow.sampler={kind: replay, ratio: 0.3, size: 10000, max_staleness: 8}|dataflow.curators=[]"
  [ds_r0.5]="dataflow.filters=[zero_advantage]|dataflow.sampler={kind: replay, ratio: 0.5, size: 10000, max_staleness: 8}|dataflow.curators=[]"
  [ds_r0.7]="dataflow.filters=[zero_advantage]|dataflow.sampler={kind: replay, ratio: 0.7, size: 10000, max_staleness: 8}|dataflow.curators=[]"
  [ds_greso_r0.3]="dataflow.filters=[zero_advantage]|dataflow.sampler={kind: replay, ratio: 0.3, size: 10000, max_staleness: 8}|dataflow.curators=[greso]"
  [ds_greso_r0.5]="dataflow.filters=[zero_advantage]|dataflow.sampler={kind: replay, ratio: 0.5, size: 10000, max_staleness: 8}|dataflow.curators=[greso]"
)
order=(vanilla ds_r0 ds_r0.3 ds_r0.5 ds_r0.7 ds_greso_r0.3 ds_greso_r0.5)

echo "variant,versions,eval_accuracy_start,eval_accuracy_end,rollouts_generated,consumed,replayed,filtered,wall_seconds" >"$out/results.csv"
for name in "${order[@]}"; do
  sets=(--set "run.output_dir=$out/$name" --set "run.init_checkpoint=$warm" --set "run.versions=$versions"
        --set run.max_wall_seconds=0 --set run.checkpoint_every=0 --set run.progress_every=40
        --set "eval.every=$versions" --set dataflow.prompt_pool=2000)
  IFS='|' read -ra plugin_sets <<<"${variants[$name]}"
  for s in "${plugin_sets[@]}"; do sets+=(--set "$s"); done
  rm -rf "${out:?}/$name"
  echo "data_algorithms: $name" >&2
  mpirun -np 4 build/bin/astraflow run "$config" "${sets[@]}" >"$out/$name.out" 2>"$out/$name.err"
  "$py" - "$out/$name/summary.json" "$name" >>"$out/results.csv" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(",".join(str(x) for x in [sys.argv[2], s["versions"], s["eval_accuracy_start"], s["eval_accuracy_end"],
                                s["rollouts_generated"], s["consumed"], s["replayed"], s["filtered"],
                                round(s["wall_seconds"], 1)]))
PY
done
column -s, -t <"$out/results.csv"

"$py" - "$out/results.csv" docs/data_algorithms.png <<'PY'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
for r in rows:
    x, y = int(r["rollouts_generated"]), float(r["eval_accuracy_end"])
    ax.scatter([x], [y])
    ax.annotate(r["variant"], (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
start = float(rows[0]["eval_accuracy_start"])
ax.axhline(start, color="grey", linestyle=":", linewidth=1, label=f"warm start {start:.3f}")
ax.set_xlabel("rollouts generated")
ax.set_ylabel("held-out greedy accuracy (final)")
ax.set_title(f"arithmetic, {rows[0]['versions']} trainer versions each")
ax.legend(loc="lower right", fontsize=8)
fig.tight_layout()
fig.savefig(sys.argv[2])
print("wrote", sys.argv[2])
PY
