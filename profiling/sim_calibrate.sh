#!/usr/bin/env bash
# Anchors the simulator to the real runtime on this machine (docs/simulation.md):
#   profiling/sim_calibrate.sh [versions=30]
# 1. Four real CPU runs of the quickstart's model from random weights (1 dataflow, 1 trainer and
#    1 rollout rank working per episode on the continuous engine): max_new_tokens 8 and 32, each
#    with 8 and with 2 episodes held (fewer rows a step). The cost models are fitted on them
#    (profiling/sim_calibrate.py fit).
# 2. A fourth real run with max_new_tokens 16 and 8 episodes held, held out of the fit, and its
#    simulated twin: the same config, the pool switched to the simulated backend (continuous
#    batching, per episode, the fitted costs, lengths drawn from the held-out run's
#    trajectories.h5) and the trainer to trainer.simulate.
# The simulated rank's own episode work (a run whose modelled accelerator costs nothing) is taken
# out of the real runs' generate time before the fit. Prints the fit and both runs' seconds per version and
# their ratio; docs/simulation.md states the tolerance. Runs with the project's .venv
# python (h5py, matplotlib: requirements/profiling.txt).
set -uo pipefail
source "$(dirname "$0")/sim_lib.sh"
cd "$here"
versions=${1:-30}
sim_need_python
sim_workdir sim_calibrate
work=$out
sed "s|max_seq_len: 32|max_seq_len: 64|" configs/quickstart.yaml >"$work/real.yaml"
common=(--set layout.2.ranks=1 --set sft.checkpoint="$work/none.h5" --set run.versions="$versions"
        --set run.max_wall_seconds=600 --set run.checkpoint_every=0 --set eval.problems=0
        --set rollout.batch_tasks=8 --set run.log_level=warn)
run() {  # run <name> [extra args...]
  local name=$1
  shift
  echo "sim_calibrate: $name ..." >&2
  mpirun -np 3 build/bin/astraflow run "$work/real.yaml" --set run.output_dir="$work/$name" "${common[@]}" "$@" \
    >"$work/$name.log" 2>&1 || { tail -n 20 "$work/$name.log" >&2; exit 1; }
}
run fit8 --set rollout.max_new_tokens=8
run fit32 --set rollout.max_new_tokens=32
run fit8b2 --set rollout.max_new_tokens=8 --set rollout.batch_tasks=2
run fit32b2 --set rollout.max_new_tokens=32 --set rollout.batch_tasks=2
run real16 --set rollout.max_new_tokens=16
# The simulated rank's own episode work, with an accelerator that costs nothing: the fit takes it
# out of the real calls' constant.
run free --set rollout.max_new_tokens=16 \
  --set "layout.2.backend={kind: simulated, prefill_tokens_per_second: 1e9, decode_tokens_per_second: 1e9}" \
  --set "trainer.simulate={fixed_seconds: 0}"
fitted=$("$py" profiling/sim_calibrate.py fit "$work/free" "$work/fit8" "$work/fit32" "$work/fit8b2" "$work/fit32b2")
backend=$(sed -n 1p <<<"$fitted")
trainer=$(sed -n 2p <<<"$fitted")
echo "backend: {$backend}"
echo "trainer.simulate: {$trainer}"
run sim16 --set rollout.max_new_tokens=16 \
  --set "layout.2.backend={kind: simulated, $backend, lengths: {kind: empirical, trajectories: $work/real16/trajectories.h5}}" \
  --set "trainer.simulate={$trainer}"
"$py" profiling/sim_calibrate.py compare "$work/real16" "$work/sim16"
