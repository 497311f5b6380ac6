#!/usr/bin/env bash
# The dataflow rank's ceiling (docs/simulation.md): one dataflow rank hosts every window, ingests
# every trajectory and serves every batch and weight pull. Each rollout rank here offers a fixed
# load — 32 trajectories of TOKENS generated tokens per modelled second (static batching, one
# second a call) — and the trainer costs nothing, so the pool's offered load grows with its size
# until the runtime stops keeping up.
#   profiling/sim_ceiling.sh [seconds=40] [pool sizes...=8 32 128 256] [--tokens 64] [--plot PNG]
# Every run: configs/simulated_longtail.yaml, max_staleness 64 (so the staleness bound does not
# gate admission), 1 MB versions as deltas, `seconds` of serving. Prints per pool: offered and
# trained trajectories/s, batches/s, the dataflow rank's CPU share, the rollout ranks' task-wait
# share, and the ratio trained / offered. Runs with the project's .venv python (h5py,
# matplotlib: requirements/profiling.txt).
set -uo pipefail
source "$(dirname "$0")/sim_lib.sh"
sim_parse "$@"
tokens=${opt[tokens]:-64}
seconds=${args[0]:-40}
pools=("${args[@]:1}")
[ ${#pools[@]} -eq 0 ] && pools=(8 32 128 256)
sim_need_python
sim_workdir sim_ceiling
for n in "${pools[@]}"; do
  echo "sim_ceiling: $n rollout ranks ..." >&2
  mpirun --oversubscribe -np $((n + 2)) "$here/build/bin/astraflow" run "$here/configs/simulated_longtail.yaml" \
    --set run.versions=1000000 --set run.max_wall_seconds="$seconds" --set run.log_level=warn \
    --set layout.2.ranks="$n" --set rollout.batch_tasks=32 --set dataflow.max_staleness=64 \
    --set "layout.2.backend={kind: simulated, batching: static, batch_slowdown: 0, prefill_tokens_per_second: 1e9, decode_tokens_per_second: $tokens, lengths: {kind: fixed, mean: $tokens}}" \
    --set "trainer.simulate={fixed_seconds: 0, seconds_per_token: 0, weight_bytes: 1000000, changed_fraction: 0.05}" \
    --set run.output_dir="$out/pool_$n" >"$out/pool_$n.log" 2>&1 || { echo "$n ranks failed:"; tail -5 "$out/pool_$n.log"; }
done
"$py" "$here/profiling/sim_ceiling.py" "$out" "$plot" "${pools[@]}"
