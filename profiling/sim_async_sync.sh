#!/usr/bin/env bash
# Async against synchronous training on a simulated long-tailed workload (docs/simulation.md):
# configs/simulated_longtail.yaml at each rollout-pool size, run.mode async and sync, the same
# number of versions. Prints seconds per version, the trainer's wait fraction and the ratio.
#   profiling/sim_async_sync.sh [versions] [pool sizes...]     (default: 8 versions, pools 8 32)
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/env.sh"
versions=${1:-8}
shift || true
pools=("$@")
[ ${#pools[@]} -eq 0 ] && pools=(8 32)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for n in "${pools[@]}"; do
  for mode in async sync; do
    dir="$out/${mode}_$n"
    mpirun --oversubscribe -np $((n + 2)) "$here/build/bin/astraflow" run "$here/configs/simulated_longtail.yaml" \
      --set run.mode=$mode --set run.versions="$versions" --set layout.2.ranks="$n" --set run.output_dir="$dir" \
      >"$dir.log" 2>&1 || { echo "run $mode at $n ranks failed: $dir.log"; tail -5 "$dir.log"; }
  done
done
python3 - "$out" "${pools[@]}" <<'PY'
import json, sys, os
out, pools = sys.argv[1], sys.argv[2:]
def load(mode, n):
    p = os.path.join(out, f"{mode}_{n}", "summary.json")
    return json.load(open(p)) if os.path.exists(p) else None
print(f"{'rollout ranks':>13} {'mode':>5} {'versions':>8} {'s/version':>9} {'trainer wait':>12} {'traj/s':>7}")
for n in pools:
    row = {}
    for mode in ("async", "sync"):
        s = load(mode, n)
        if not s:
            continue
        spv = s["wall_seconds"] / s["versions"]
        row[mode] = spv
        print(f"{n:>13} {mode:>5} {s['versions']:>8} {spv:>9.2f} {s['trainer_wait_fraction']:>12.2f} "
              f"{s['rollout_trajectories_per_s']:>7.1f}")
    if len(row) == 2:
        print(f"{n:>13} sync / async time per version: {row['sync'] / row['async']:.2f}")
PY
