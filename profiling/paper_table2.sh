#!/usr/bin/env bash
# The paper's Table 2 in miniature (docs/multi-policy.md, "Table 2 in miniature"): on generated
# text word problems, a small Qwen3-shaped policy (scripts/text_math.sh's) warm-started by SFT,
# each variant in the same wall budget per run:
#   single      the Solver alone, fully asynchronous (4 ranks)
#   team_async  the Solver + Verifier team, fully asynchronous (5 ranks)
#   team_sync   the same team, synchronous (run.mode: sync: each batch at one version)
# Evaluated at the start and the end on three sets of different difficulty: `digits1` and `digits3`
# (eval.sets: one-digit operands, and three-digit ones beyond anything trained on) and `held_out`
# (environment.eval: two-digit operands, as in training; the column `digits2`). Reports each set's
# accuracy and their mean (a team's: its final answer), time per iteration (wall ÷ versions, and
# between the first and the last version, the evaluation rounds left out) and trainer wait, as
# mean ± spread over the seeds.
#   profiling/paper_table2.sh [wall_seconds] [seeds...]     (default 240 s, seeds 1 2 3)
# Writes runs/paper_table2/results.csv and prints the table.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
py=.venv/bin/python  # the standard library is all the tables need
[ -x "$py" ] || py=python3
wall=${1:-240}
shift || true
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3)
out=runs/paper_table2
data=$out/data
mkdir -p "$data"
bin=build/bin/astraflow

# The model and the data: training rows with operands up to 99, and held-out sets of one, two and
# three digits (make_word_problems.py holds out the same problems whatever --max is, so no set
# shares a problem with the training rows).
if [ ! -f "$out/model/config.json" ]; then
  $bin init-model "$out/model" --hidden-size 96 --layers 3 --heads 4 --kv-heads 2 --head-dim 24 \
    --intermediate-size 256 --max-positions 1536 --seed 1 >/dev/null
fi
if [ ! -f "$data/digits3.jsonl" ]; then
  "$py" scripts/make_word_problems.py --out "$data" --train 20000 --eval 200 --max 99 --seed 1
  mv "$data/eval.jsonl" "$data/digits2.jsonl"
  for spec in "1 9 2" "3 999 3"; do
    set -- $spec
    "$py" scripts/make_word_problems.py --out "$data/tmp" --train 1 --eval 200 --max "$2" --seed "$3"
    # One-digit operands: only a few held-out problems exist; their wordings differ.
    if [ "$1" = 1 ]; then
      "$py" - "$data/tmp/eval.jsonl" "$data/digits1.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[2], "w") as f:
    for r in rows:
        if r["difficulty"] == 1:
            f.write(json.dumps(r) + "\n")
PY
    else
      mv "$data/tmp/eval.jsonl" "$data/digits3.jsonl"
    fi
  done
  rm -rf "$data/tmp"
fi

common() {  # the keys both variants share
  cat <<YAML
environment:
  name: dataset
  train: [$data/train.jsonl]
  eval: [$data/digits2.jsonl]
  enable_thinking: false
  reward: {kind: math}
rollout: {group_size: 8, temperature: 1.0, max_new_tokens: 20, batch_tasks: 64}
trainer: {lr: 0.0002, groups_per_step: 16, grad_clip: 1.0, micro_batch_tokens: 16384}
sft: {max_steps: 400, batch_size: 32, lr: 0.003, target_accuracy: 0.5, eval_every: 100}
eval:
  problems: 100           # held_out: environment.eval, two-digit operands as in training
  every: 1000000          # rounds at the start and at the end
  sets:
    - {name: digits1, path: $data/digits1.jsonl, problems: 100}
    - {name: digits3, path: $data/digits3.jsonl, problems: 100}
dataflow:
  max_staleness: 4
  task_ring: {slots: 1024, slot_bytes: 256}
  trajectory_ring: {slots: 1024, slot_bytes: 65536}
  batch_ring: {slots: 8, slot_bytes: 8388608}
YAML
}
cat >"$out/single.yaml" <<YAML
run: {name: single, output_dir: $out/single, versions: 100000, max_wall_seconds: $wall, progress_every: 20}
policies:
  - {name: solver, model: {hf: $out/model, max_seq_len: 1536}}
layout:
  - {role: dataflow, ranks: 1}
  - {role: trainer, policy: solver, ranks: 1}
  - {role: rollout, policies: [solver], ranks: 2}
$(common)
YAML
cat >"$out/team.yaml" <<YAML
run: {name: team, output_dir: $out/team, versions: 100000, max_wall_seconds: $wall, progress_every: 20}
policies:
  - {name: solver, model: {hf: $out/model, max_seq_len: 1536}}
  - {name: verifier, model: {hf: $out/model, max_seq_len: 1536}}
workflow: {kind: solver_verifier, roles: {solver: solver, verifier: verifier}, max_rounds: 2}
layout:
  - {role: dataflow, ranks: 1}
  - {role: trainer, policy: solver, ranks: 1}
  - {role: trainer, policy: verifier, ranks: 1}
  - {role: rollout, policies: [solver, verifier], ranks: 2}
$(common)
YAML

# Warm starts from one base model, each on its own prompts with the same SFT keys: the single
# Solver on the rows' prompts; the team's Solver on the paper's A.9 prompt and its Verifier (from
# the Solver's result) on right and wrong solutions (`astraflow sft` on a text team).
[ -f "$out/sft_single.h5" ] || $bin sft "$out/single.yaml" --set "sft.checkpoint=$out/sft_single.h5" \
  >"$out/sft_single.log" 2>&1 || { tail "$out/sft_single.log"; exit 1; }
[ -f "$out/sft_team.h5" ] || $bin sft "$out/team.yaml" --set "sft.checkpoint=$out/sft_team.h5" \
  >"$out/sft_team.log" 2>&1 || { tail "$out/sft_team.log"; exit 1; }

echo "variant,seed,versions,wall_seconds,seconds_per_version,steady_seconds_per_version,trainer_wait,digits1,digits2,digits3,mean,mean_start" \
  >"$out/results.csv"
for seed in "${seeds[@]}"; do
  for variant in single team_async team_sync; do
    config=$out/team.yaml mode=async warm=$out/sft_team.h5
    [ "$variant" = single ] && config=$out/single.yaml warm=$out/sft_single.h5
    [ "$variant" = team_sync ] && mode=sync
    dir="$out/${variant}_s$seed"
    rm -rf "$dir"
    echo "paper_table2: $variant seed $seed ($wall s)" >&2
    mpirun -np "$($bin layout-size "$config")" $bin run "$config" --set "run.output_dir=$dir" \
      --set "run.seed=$seed" --set "run.mode=$mode" --set "run.init_checkpoint=$warm" >"$dir.out" 2>"$dir.err" ||
      { tail -n 20 "$dir.err"; exit 1; }
    "$py" - "$dir" "$variant" "$seed" >>"$out/results.csv" <<'PY'
import json, sys
import h5py
s = json.load(open(f"{sys.argv[1]}/summary.json"))
sets = s["eval_sets"]
# Seconds per version over the whole segment (the start and final evaluation rounds included),
# and between the first and the last version the Solver's trainer published (the rounds left out).
per_version = round(s["segment_wall_seconds"] / s["versions"], 3) if s["versions"] > 0 else float("nan")
events = h5py.File(f"{sys.argv[1]}/trace.h5")["events"][:]
published = sorted(e["t_start"] for e in events if e["kind"] == b"publish" and e["policy"] == 0 and e["version"] >= 1)
steady = round((published[-1] - published[0]) / (len(published) - 1), 3) if len(published) > 1 else float("nan")
print(",".join(str(x) for x in [sys.argv[2], sys.argv[3], s["versions"], round(s["segment_wall_seconds"], 1),
                                per_version, steady, round(s["trainer_wait_fraction"], 3),
                                sets["digits1"]["accuracy"], sets["held_out"]["accuracy"], sets["digits3"]["accuracy"],
                                s["eval_accuracy_end"], s["eval_accuracy_start"]]))
PY
  done
done
"$py" - "$out/results.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def ms(values):
    values = [float(v) for v in values]
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3f} ± {sd:.3f}"
print("| variant | seeds | digits1 | digits2 | digits3 | mean (start → end) | versions | s / version (segment) | s / version (between versions) | trainer wait |")
print("|---|---|---|---|---|---|---|---|---|---|")
for variant in ("single", "team_async", "team_sync"):
    r = [x for x in rows if x["variant"] == variant]
    if not r:
        continue
    start = statistics.mean(float(x["mean_start"]) for x in r)
    print(f"| {variant} | {len(r)} | " + " | ".join(ms(x[k] for x in r) for k in ("digits1", "digits2", "digits3"))
          + f" | {start:.3f} → {ms(x['mean'] for x in r)} | {ms(x['versions'] for x in r)} | "
          f"{ms(x['seconds_per_version'] for x in r)} | {ms(x['steady_seconds_per_version'] for x in r)} | "
          f"{ms(x['trainer_wait'] for x in r)} |")
PY
