#!/usr/bin/env bash
# What a stalled remote site costs the home run's local pool (docs/cross-site.md): the same home
# job (configs/cross_site_home.yaml: dataflow, trainer, one local rollout rank) run twice, side
# by side — with no site, and with a site that joins, asks for 64 full versions and stops
# reading (tests/cli/stalled_gateway). Prints each run's local rollout throughput and wall time
# and their ratio. Run from a built tree:
#   profiling/site_stall.sh [versions (40)] [stall_seconds (10)]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
versions=${1:-40} stall=${2:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -e "s|output_dir: .*|output_dir: $work/run|" -e "s|listen: .*|listen: 127.0.0.1:$port|" \
    configs/cross_site_home.yaml >"$work/home.yaml"
export ASTRAFLOW_SITE_TOKEN=bench-$RANDOM
common=(--set run.versions="$versions" --set run.max_wall_seconds=0 --set eval.problems=0
        --set cross_site.stall_seconds="$stall" --set cross_site.outbox_bytes=67108864)

mpirun -np 3 build/bin/astraflow run "$work/home.yaml" "${common[@]}" --set cross_site.wait_for_sites=0 \
  --set run.output_dir="$work/alone" >/dev/null 2>"$work/alone.err"
build/bin/stalled_gateway "$work/home.yaml" 127.0.0.1 "$port" 64 600 >/dev/null 2>&1 &
gw=$!
mpirun -np 3 build/bin/astraflow run "$work/home.yaml" "${common[@]}" --set cross_site.wait_for_sites=1 \
  --set run.output_dir="$work/stalled" >/dev/null 2>"$work/stalled.err"
kill "$gw" 2>/dev/null || true

python3 - "$work/alone/summary.json" "$work/stalled/summary.json" "$versions" "$stall" <<'PY'
import json, sys
alone, stalled = (json.load(open(p)) for p in sys.argv[1:3])
print(f"site_stall: {sys.argv[3]} versions, stall_seconds {sys.argv[4]}")
print(f"{'run':<22}{'wall s':>8}{'local traj/s':>14}{'trainer wait':>14}  site")
for name, s in (("no site", alone), ("stalled site", stalled)):
    xs = s.get("cross_site", {})
    site = f"joined {xs.get('joined', 0)}, lost {xs.get('lost', 0)}, stalled {xs.get('stalled', 0)}"
    print(f"{name:<22}{s['wall_seconds']:>8.1f}{s['rollout_trajectories_per_s']:>14.1f}"
          f"{s['trainer_wait_fraction']:>14.3f}  {site}")
print(f"ratio stalled / no site: local throughput {stalled['rollout_trajectories_per_s'] / alone['rollout_trajectories_per_s']:.3f}, "
      f"wall {stalled['wall_seconds'] / alone['wall_seconds']:.3f}")
PY
