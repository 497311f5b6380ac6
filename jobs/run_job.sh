#!/usr/bin/env bash
# The body every jobs/*.sbatch script runs, inside its allocation, from the repository root
# (submit from there: `sbatch jobs/quickstart.sbatch [--set key=value ...]`):
#   - the rank count comes from the config (`astraflow layout-size`) and must fit the job's tasks;
#   - the warm start is made first when its checkpoint is missing (`astraflow sft`, one process),
#     never for policies given as Hugging Face folders (they start from their folders);
#   - the run is launched with mpirun (default; extra flags in ASTRAFLOW_MPIRUN_FLAGS, e.g.
#     --enable-recovery for elastic jobs) or `srun --mpi=pmix` (ASTRAFLOW_LAUNCHER=srun).
# Usage: jobs/run_job.sh CONFIG [astraflow run arguments...]
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
config=$1
shift
# Run-as-root consent and oversubscription for small nodes; harmless on a cluster node.
source scripts/env.sh
bin=build/bin/astraflow
[ -x "$bin" ] || { echo "run_job: $bin missing; build first (scripts/setup.sh)" >&2; exit 2; }
np=$("$bin" layout-size "$config")
tasks=${SLURM_NTASKS:-$np}
if [ "$np" -gt "$tasks" ]; then
  echo "run_job: $config needs $np ranks but the job has $tasks tasks (raise #SBATCH --ntasks)" >&2
  exit 2
fi
warm=$("$bin" warm-start-path "$config")
if [ -n "$warm" ] && [ ! -e "$warm" ]; then
  echo "run_job: no warm start at $warm; making it with astraflow sft" >&2
  "$bin" sft "$config" >/dev/null
fi
echo "run_job: $config on $np of $tasks tasks (job ${SLURM_JOB_ID:-none}, nodes ${SLURM_JOB_NODELIST:-local})" >&2
if [ "${ASTRAFLOW_LAUNCHER:-mpirun}" = srun ]; then
  exec srun --mpi=pmix -n "$np" "$bin" run "$config" "$@"
fi
# shellcheck disable=SC2086  # the flags are words on purpose
exec mpirun ${ASTRAFLOW_MPIRUN_FLAGS:-} -np "$np" "$bin" run "$config" "$@"
