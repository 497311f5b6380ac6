#!/usr/bin/env bash
# bench_autoscale [versions=80]: the paper's Table 4 analogue (docs/elastic.md) on this machine.
# One workload — the quickstart's policy (max_seq_len raised to 96) from random weights, 2 groups
# per step, generations that grow by 2 tokens per version (rollout.min/max_new_tokens_growth: 4
# tokens at the start, up to the context at the end), decoded 8 tasks at a time, so rollout gets
# dearer as the run goes and the trainer starts to wait — run three ways, one after another:
#   small  a fixed pool of 2 rollout ranks
#   large  a fixed pool of 4 rollout ranks
#   auto   2 rollout ranks, elastic.mode auto (the three-zone policy every 5 versions, G in [2, 4])
# Prints per run: wall seconds, rollout rank-seconds (each rollout rank's active span in the
# trace, spawned ones included), trainer rank-seconds (the trainer is held the whole run), their
# total, the trainer wait fraction, and the ratios to `large`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
versions=${1:-80}
bin=build/bin/astraflow
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--set sft.checkpoint="$work/none.h5" --set run.versions="$versions" --set run.max_wall_seconds=900
        --set run.checkpoint_every=0 --set eval.problems=0 --set trainer.groups_per_step=2
        --set rollout.batch_tasks=8 --set rollout.max_new_tokens=4 --set rollout.max_new_tokens_growth=2
        --set rollout.min_new_tokens_growth=2 --set elastic.every=5
        --set run.log_level=warn)
sed "s|max_seq_len: 32|max_seq_len: 96|" configs/quickstart.yaml >"$work/small.yaml"
sed "s|{role: rollout, policies: \[solver\], ranks: 2}|{role: rollout, policies: [solver], ranks: 4}|" \
  "$work/small.yaml" >"$work/large.yaml"

run() {  # run <name> <np> <config> [extra args...]
  local name=$1 np=$2 config=$3
  shift 3
  echo "bench_autoscale: $name ..." >&2
  mpirun --enable-recovery -np "$np" "$bin" run "$config" --set run.output_dir="$work/$name" "${common[@]}" "$@" \
    >"$work/$name.out" 2>"$work/$name.err" || { tail -n 20 "$work/$name.err" >&2; exit 1; }
  "$bin" trace "$work/$name" --format json >"$work/$name.trace.json"
}
run small 4 "$work/small.yaml"
run large 6 "$work/large.yaml"
run auto 4 "$work/small.yaml" --set elastic.mode=auto --set elastic.g_min=2 --set elastic.g_max=4 \
  --set elastic.spawn_max=2

python3 - "$work" <<'EOF'
import json, sys
work = sys.argv[1]
rows = {}
for name in ("small", "large", "auto"):
    s = json.load(open(f"{work}/{name}/summary.json"))
    t = json.load(open(f"{work}/{name}.trace.json"))
    df = [r for r in s["ranks"] if r["role"] == "dataflow"][0]
    trainers = [r for r in s["ranks"] if r["role"] == "trainer"]
    rollout_rank_s = sum(r["span_s"] for r in t["rollouts"])
    trainer_rank_s = s["wall_seconds"] * len(trainers)
    rows[name] = dict(wall=s["wall_seconds"], rollout=rollout_rank_s, trainer=trainer_rank_s,
                      total=rollout_rank_s + trainer_rank_s, wait=s["trainer_wait_fraction"],
                      spawned=int(df.get("elastic_spawned_ranks", 0)), retired=int(df.get("elastic_retired_ranks", 0)),
                      produced=s["produced"], stale=s["stale_dropped"])
print(f"{'run':<6} {'wall s':>8} {'rollout rank-s':>15} {'trainer rank-s':>15} {'total rank-s':>13} {'wait frac':>10}"
      f" {'spawned':>8} {'produced':>9} {'stale':>6} {'wall/large':>11} {'total/large':>12}")
for name, r in rows.items():
    base = rows["large"]
    print(f"{name:<6} {r['wall']:>8.1f} {r['rollout']:>15.1f} {r['trainer']:>15.1f} {r['total']:>13.1f} {r['wait']:>10.3f}"
          f" {r['spawned']:>8} {r['produced']:>9} {r['stale']:>6} {r['wall'] / base['wall']:>11.2f} {r['total'] / base['total']:>12.2f}")
EOF
