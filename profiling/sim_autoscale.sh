#!/usr/bin/env bash
# Autoscaling against fixed pools on a simulated workload whose lengths grow over the run
# (docs/simulation.md): configs/simulated_longtail.yaml with lognormal lengths of median 300 and
# sigma 0.5, × (1 + 0.05 × version), 16 MB versions and a 2 s trainer step, run three ways:
#   small  a fixed pool of SMALL rollout ranks
#   large  a fixed pool of LARGE rollout ranks
#   auto   SMALL ranks, elastic.mode auto: the three-zone policy every 5 versions, G in [SMALL, LARGE]
#   profiling/sim_autoscale.sh [versions=40] [small=8] [large=20] [--plot PNG]
# Prints wall seconds, rollout rank-seconds (each rollout rank's first to last event, spawned
# ones included), the trainer's wait and the ratios to `large`; --plot draws each run's pool size
# and seconds per version against the version. Runs with the project's .venv python
# (h5py, matplotlib: requirements/profiling.txt).
set -uo pipefail
source "$(dirname "$0")/sim_lib.sh"
sim_parse "$@"
versions=${args[0]:-40}
small=${args[1]:-8}
large=${args[2]:-20}
sim_need_python
sim_workdir sim_autoscale
common=(--set run.versions="$versions" --set run.log_level=warn --set run.max_wall_seconds=1800
        --set trainer.simulate.weight_bytes=16000000 --set trainer.simulate.fixed_seconds=2.0
        --set layout.2.backend.lengths.median=300 --set layout.2.backend.lengths.sigma=0.5
        --set layout.2.backend.growth_per_version=0.05 --set rollout.batch_tasks=32 --set elastic.every=5)
run() {  # run <name> <rollout ranks> [extra args...]
  local name=$1 n=$2
  shift 2
  echo "sim_autoscale: $name ..." >&2
  mpirun --oversubscribe --enable-recovery -np $((n + 2)) "$here/build/bin/astraflow" run \
    "$here/configs/simulated_longtail.yaml" "${common[@]}" --set layout.2.ranks="$n" \
    --set run.output_dir="$out/$name" "$@" >"$out/$name.log" 2>&1 || { echo "$name failed:"; tail -5 "$out/$name.log"; }
}
run small "$small"
run large "$large"
run auto "$small" --set elastic.mode=auto --set elastic.g_min="$small" --set elastic.g_max="$large" \
  --set elastic.spawn_max=$((large - small))
"$py" "$here/profiling/sim_autoscale.py" "$out" "$plot"
