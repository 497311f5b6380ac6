#!/usr/bin/env bash
# The main job on its embedded default: set-up (packages + build), the warm start when its
# checkpoint is absent, then the distributed run:
#   build/bin/astraflow sft configs/quickstart.yaml          (only if runs/quickstart/sft.h5 is missing)
#   mpirun -np 4 build/bin/astraflow run configs/quickstart.yaml
# Extra arguments go to `astraflow run` (e.g. --set run.max_wall_seconds=60); extra mpirun flags
# in ASTRAFLOW_MPIRUN_FLAGS (e.g. --enable-recovery for configs/elastic.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
ASTRAFLOW_REQUIREMENTS=build bash scripts/setup.sh
source scripts/env.sh
config=configs/quickstart.yaml
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then config=$1; shift; fi
# The warm start's path is the config's sft.checkpoint (default <output_dir>/sft.h5).
# The run's --set overrides name its warm start too (run.output_dir moves it).
sets=()
prev=
for a in "$@"; do
  [ "$prev" = --set ] && sets+=(--set "$a")
  case $a in --set=*) sets+=("$a") ;; esac
  prev=$a
done
warm=$(build/bin/astraflow warm-start-path "$config" "${sets[@]}")
if [ -n "$warm" ] && [ ! -e "$warm" ]; then
  echo "quickstart: no warm start at $warm; making it with astraflow sft (a few minutes)" >&2
  build/bin/astraflow sft "$config" "${sets[@]}" >/dev/null
fi
np=$(build/bin/astraflow layout-size "$config")
# Elastic configs spawn and may lose ranks; the job survives that only with
# ASTRAFLOW_MPIRUN_FLAGS=--enable-recovery (docs/architecture.md §9; jobs/elastic.sbatch sets it).
# Run again, the quickstart starts over in its folder (--overwrite: the earlier run's checkpoints,
# traces and trajectories go; the warm start sft.h5 stays); `--resume runs/quickstart` continues it.
fresh=(--overwrite)
for a in "$@"; do [ "$a" = --resume ] && fresh=(); done
# shellcheck disable=SC2086  # the flags are words on purpose
exec mpirun ${ASTRAFLOW_MPIRUN_FLAGS:-} -np "$np" build/bin/astraflow run "$config" "${fresh[@]}" "$@"
