#!/usr/bin/env bash
# Async against colocated-synchronous training on the simulated long-tailed workload
# (docs/simulation.md): configs/simulated_longtail.yaml at each pool size N, 16 MB versions.
#   profiling/sim_async_sync.sh [versions=20] [pool sizes...=8 32 128] [--sync-versions 8]
#                               [--staleness ETA] [--modes "async sync"] [--plot PNG]
# async  N rollout ranks and the trainer's own rank; each rollout rank takes 32 tasks a call.
# sync   run.mode sync, colocated: the trainer's accelerator joins the pool (N + 1 rollout
#        ranks) and the step is data-parallel over all N + 1 (seconds_per_token / (N + 1)); the
#        256 tasks of a version are spread over the pool (ceil(256 / (N + 1)) a call).
# Sync runs fewer versions: each of its versions waits for its longest rollout, so its time per
# version is steady from the second one. Prints steady-state seconds per version (second to
# next-to-last publish), the trainer's wait, trajectories/s, stale drops, the share of this
# machine's cores the ranks used (all, and the rollout ranks; near 1: CPU-bound, the run measures
# this machine rather than the modelled accelerators) and the sync / async ratio; --plot writes the figure. Its tables
# and figure are made with the project's .venv python (h5py, matplotlib: requirements/profiling.txt).
set -uo pipefail
source "$(dirname "$0")/sim_lib.sh"
sim_parse "$@"
sync_versions=${opt[sync-versions]:-8}
modes=${opt[modes]:-async sync}
staleness=()  # --staleness: the async runs' dataflow.max_staleness (default: the config's 4)
[ -n "${opt[staleness]:-}" ] && staleness=(--set dataflow.max_staleness="${opt[staleness]}")
versions=${args[0]:-20}
pools=("${args[@]:1}")
[ ${#pools[@]} -eq 0 ] && pools=(8 32 128)
sim_need_python
sim_workdir sim_async_sync
per_token=$(sed -n 's/.*seconds_per_token: \([0-9.e-]*\).*/\1/p' "$here/configs/simulated_longtail.yaml")
common=(--set run.log_level=warn --set run.max_wall_seconds=1800
        --set trainer.simulate.weight_bytes=16000000)
for n in "${pools[@]}"; do
  if [[ " $modes " == *" async "* ]]; then
    echo "sim_async_sync: async at $n ..." >&2
    mpirun --oversubscribe -np $((n + 2)) "$here/build/bin/astraflow" run "$here/configs/simulated_longtail.yaml" \
      "${common[@]}" "${staleness[@]}" --set run.mode=async --set run.versions="$versions" --set layout.2.ranks="$n" \
      --set rollout.batch_tasks=32 --set run.output_dir="$out/async_$n" >"$out/async_$n.log" 2>&1 ||
      { echo "async at $n failed:"; tail -5 "$out/async_$n.log"; }
  fi
  if [[ " $modes " == *" sync "* ]]; then
    echo "sim_async_sync: sync at $n ..." >&2
    pool=$((n + 1))
    mpirun --oversubscribe -np $((pool + 2)) "$here/build/bin/astraflow" run "$here/configs/simulated_longtail.yaml" \
      "${common[@]}" --set run.mode=sync --set run.versions="$sync_versions" --set layout.2.ranks="$pool" \
      --set rollout.batch_tasks=$(((256 + pool - 1) / pool)) \
      --set trainer.simulate.seconds_per_token="$(python3 -c "print($per_token / $pool)")" \
      --set run.output_dir="$out/sync_$n" >"$out/sync_$n.log" 2>&1 || { echo "sync at $n failed:"; tail -5 "$out/sync_$n.log"; }
  fi
done
"$py" "$here/profiling/sim_async_sync.py" "$out" "$plot" "${pools[@]}"
