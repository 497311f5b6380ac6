#!/usr/bin/env bash
# Runs jobs/quickstart.sbatch under a real, throw-away, one-node Slurm on this machine:
# installs Debian's slurm-wlm and munge when missing, writes a slurm.conf for this host into a
# temp dir, starts munged, slurmctld and slurmd (own socket, pid and state files there),
# submits the job with a short override and waits for it, checks its exit state and that its
# run folder holds the HDF5 outputs and summary.json, then stops every daemon it started (by
# PID, also when something fails). Not part of scripts/test.sh (a few minutes); docs/slurm.md.
#   scripts/test_slurm.sh [extra --set overrides for the job...]
# ASTRAFLOW_SLURM_JOB=jobs/http_rollout.sbatch runs that job instead, on one node with
# `astraflow serve` on the CPU as its server (ASTRAFLOW_SERVER=astraflow, --gres=none).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
source scripts/env.sh

need=()
for p in slurm-wlm munge; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  sudo_=(); [ "$(id -u)" -eq 0 ] || sudo_=(sudo)
  echo "test_slurm: installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive "${sudo_[@]}" apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
[ -x build/bin/astraflow ] || ASTRAFLOW_REQUIREMENTS=test bash scripts/setup.sh

tmp=$(mktemp -d /tmp/astraflow_slurm.XXXXXX)
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/munge"
host=$(hostname -s)
# Stops the daemons this script started, by their pid files: TERM, up to 10 s to exit, then KILL.
stop_daemons() {
  local pids=() f
  for f in "$tmp/slurmd.pid" "$tmp/slurmctld.pid" "$tmp/munge/munged.pid"; do
    [ -f "$f" ] && pids+=("$(cat "$f")")
  done
  ((${#pids[@]})) || return 0
  kill "${pids[@]}" 2>/dev/null || true
  local alive p
  for _ in $(seq 50); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 1 ] || break
    sleep 0.2
  done
  kill -9 "${pids[@]}" 2>/dev/null || true
  echo "test_slurm: stopped the daemons it started (pids ${pids[*]})"
}
trap stop_daemons EXIT

# munged on its own socket, with the key Debian's package generated.
munged --force --socket="$tmp/munge/munge.socket" --pid-file="$tmp/munge/munged.pid" \
  --log-file="$tmp/munge/munged.log" --seed-file="$tmp/munge/munged.seed" --key-file=/etc/munge/munge.key
for _ in $(seq 50); do [ -S "$tmp/munge/munge.socket" ] && break; sleep 0.1; done

# One node, more CPUs than the box has (config_overrides) so a job can hold every rank of a
# layout; no cgroups, no accounting.
cat >"$tmp/slurm.conf" <<CONF
ClusterName=astraflowtest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/munge.socket
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldPort=${ASTRAFLOW_SLURMCTLD_PORT:-16817}
SlurmdPort=${ASTRAFLOW_SLURMD_PORT:-16818}
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SlurmdParameters=config_overrides
MinJobAge=600
NodeName=$host CPUs=8 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$tmp/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
  sinfo -h -o %T 2>/dev/null | grep -qE "idle|mixed" && break
  sleep 1
done
sinfo

run=$tmp/run
# The job makes the config's warm start when it is missing; the run, moved to $run, loads it.
warm=$(build/bin/astraflow warm-start-path configs/quickstart.yaml)
job_script=${ASTRAFLOW_SLURM_JOB:-jobs/quickstart.sbatch}
sbatch_args=()
if [ "$job_script" = jobs/http_rollout.sbatch ]; then
  sbatch_args=(--nodes=1 --gres=none)
  export ASTRAFLOW_SERVER=astraflow ASTRAFLOW_SERVER_DEVICE=cpu ASTRAFLOW_SHARED_DIR=$tmp/shared ASTRAFLOW_SERVER_PORT=30517
fi
echo "test_slurm: submitting $job_script"
set +e
sbatch --wait --parsable --chdir="$repo" --output="$tmp/job-%j.out" "${sbatch_args[@]}" "$job_script" \
  --set "run.output_dir=$run" --set "run.init_checkpoint=$warm" --set run.versions=4 --set run.max_wall_seconds=0 --set eval.problems=20 \
  --set eval.every=2 --set run.progress_every=2 "$@" >"$tmp/sbatch.out"
rc=$?
set -e
job=$(head -n 1 "$tmp/sbatch.out" | cut -d';' -f1)
state=$(scontrol show job "$job" 2>/dev/null | grep -o "JobState=[A-Z_]*" | cut -d= -f2 || true)
exit_code=$(scontrol show job "$job" 2>/dev/null | grep -o " ExitCode=[0-9:]*" | cut -d= -f2 || true)
echo "test_slurm: job $job ended: sbatch rc $rc, state $state, exit code $exit_code"
failures=0
[ "$rc" -eq 0 ] || { echo "FAIL: sbatch --wait returned $rc"; failures=$((failures + 1)); }
[ "$state" = COMPLETED ] || { echo "FAIL: job state $state, wanted COMPLETED"; failures=$((failures + 1)); }
for f in trace.h5 trajectories.h5 summary.json checkpoints/step_4.h5 checkpoints/step_4.solver.h5; do
  [ -f "$run/$f" ] || { echo "FAIL: $run/$f missing"; failures=$((failures + 1)); }
done
if [ -f "$run/summary.json" ]; then
  grep -q '"versions": 4' "$run/summary.json" || { echo "FAIL: summary.json does not say versions 4"; failures=$((failures + 1)); }
fi
echo "--- job output (tail)"; tail -n 5 "$tmp"/job-*.out || true
if [ "$failures" -ne 0 ]; then
  echo "--- slurmctld.log (tail)"; tail -n 20 "$tmp/slurmctld.log" || true
  echo "--- slurmd.log (tail)"; tail -n 20 "$tmp/slurmd.log" || true
  echo "test_slurm: $failures failure(s); logs in $tmp"
  exit 1
fi
echo "test_slurm: passed (job $job COMPLETED, run folder with trace.h5, trajectories.h5, checkpoints, summary.json)"
