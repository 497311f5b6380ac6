#!/usr/bin/env bash
# A run whose trainer is killed (SIGKILL, as the kernel's OOM killer does) leaves files that can
# be read: trace events and trajectories reach disk by time (run.flush_seconds) as well as by
# count, `astraflow trace RUN` and `--balance` read the per-rank trace files of a run that never
# merged its trace.h5 and say which ranks ended cleanly, and the death message says what is
# survivable today. Each rank's report reaches <run>/trace/rank_<r>.report by time too, and
# `astraflow trace` shows them.
#   test_killed_run.sh <astraflow binary> <source dir> <mpiexec> <python with h5py> <ranks: 3|4>
set -uo pipefail
bin=$1 src=$2 mpiexec=$3 python=$4 ranks=$5
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

rollouts=$((ranks - 2))
# A trainer that learns slowly enough that 256 events or trajectories are not reached by count
# before the kill would, before run.flush_seconds, have left empty files.
"$mpiexec" -n "$ranks" --oversubscribe "$bin" run "$src/configs/quickstart.yaml" \
  --set run.output_dir="$work/run" --set sft.checkpoint="$work/none.h5" --set run.versions=100000 \
  --set run.max_wall_seconds=120 --set run.flush_seconds=1 --set eval.problems=0 --set run.progress_every=2 \
  --set "layout.2.ranks=$rollouts" >"$work/out" 2>"$work/err" &
job=$!

# The trainer is world rank 1 (configs/quickstart.yaml's layout); Open MPI names each process's
# rank in its environment.
trainer=""
for _ in $(seq 1 600); do
  for pid in $(pgrep -f "$bin run $src/configs/quickstart.yaml"); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then trainer=$pid; fi
  done
  # Kill once some versions were trained and at least one time-based flush happened since.
  if [ -n "$trainer" ] && grep -q "solver v6 " "$work/err"; then break; fi
  sleep 0.2
done
[ -n "$trainer" ] || fail "no trainer process found"
sleep 2
kill -9 "$trainer" 2>/dev/null || fail "the trainer (pid $trainer) was gone before the kill"
timeout 120 bash -c "while kill -0 $job 2>/dev/null; do sleep 0.2; done" || fail "mpirun did not end after the kill"
wait $job
rc=$?
[ $rc -ne 0 ] || fail "mpirun exited 0 after its trainer was killed"
grep -q "Survivable today: rollout ranks that elastic pools spawned" "$work/err" ||
  fail "the death message does not say what is survivable: $(grep astraflow: "$work/err" | tail -3)"
[ ! -e "$work/run/trace.h5" ] || fail "a killed run merged its trace.h5"

"$bin" trace "$work/run" >"$work/trace.txt" 2>&1 || fail "astraflow trace on the killed run: $(cat "$work/trace.txt")"
grep -q "no trace.h5 (the run was killed, or is still going): read rank by rank; 0 of $ranks ended cleanly" \
  "$work/trace.txt" || fail "trace does not say how the ranks ended: $(head -20 "$work/trace.txt")"
grep -q "each rank's last report" "$work/trace.txt" || fail "trace does not print the ranks' last reports"
"$bin" trace "$work/run" --format json >"$work/trace.json" 2>&1 || fail "astraflow trace --format json"
"$bin" trace "$work/run" --balance 2 >"$work/balance.txt" 2>&1 || fail "balance replay: $(cat "$work/balance.txt")"

"$python" - "$work/run" "$ranks" "$work/trace.json" <<'PY' || fail "file checks (above)"
import json, sys
import h5py
run, ranks, trace_json = sys.argv[1], int(sys.argv[2]), sys.argv[3]
bad = []
def check(ok, what):
    if not ok: bad.append(what)
t = json.load(open(trace_json))
files = t["rank_files"]
check(len(files) == ranks, f"one file per rank: {[f['path'] for f in files]}")
check(all(f["error"] is None for f in files), f"every per-rank file readable: {files}")
check(not any(f["clean_end"] for f in files), "no rank ended cleanly")
check(all(f["events"] > 0 for f in files), f"every rank's events reached its file: {files}")
# A handful of steps' events (3 a step) never reach 256 by count: these reached the file by time.
check(t["trainers"] and t["trainers"][0]["steps"] >= 4, f"the trainer's steps up to the kill: {t['trainers']}")
check(len(t["rollouts"]) == ranks - 2 and all(r["trajectories"] > 0 for r in t["rollouts"]), f"rollouts: {t['rollouts']}")
# Each rank's report as its last write (every run.flush_seconds) left it: the figures a summary.json
# would have held.
reports = t["rank_reports"]
check(len(reports) == ranks and all("error" not in r for r in reports), f"one readable report per rank: {reports}")
by_role = {}
for r in reports:
    by_role.setdefault(r.get("role"), []).append(r)
trainer = by_role.get("trainer", [{}])[0].get("figures", {})
check(trainer.get("steps", 0) >= 4, f"the trainer's report holds its steps up to a flush before the kill: {trainer}")
check(all(r["figures"]["pushed"] > 0 for r in by_role.get("rollout", [])) and len(by_role.get("rollout", [])) == ranks - 2,
      f"the rollout ranks' reports: {by_role.get('rollout')}")
df = by_role.get("dataflow", [{}])[0].get("figures", {})
check(df.get("produced", 0) > 0 and df.get("versions", 0) >= 4, f"the dataflow rank's report: {df}")
check(all(r["peak_rss_bytes"] > 0 for r in reports), "each report has its rank's peak resident set")
check(all(0 < r["peak_private_bytes"] <= r["peak_rss_bytes"] for r in reports), "and its sampled private peak")
with h5py.File(f"{run}/trajectories.h5", "r") as f:
    rows = f["reward"].shape[0]
check(rows > 0, f"trajectories.h5 holds the trajectories written before the kill: {rows} rows")
if bad:
    print("\n".join(bad))
    sys.exit(1)
PY

if [ $failures -ne 0 ]; then
  echo "--- stderr (tail)"; tail -n 30 "$work/err"
  echo "--- trace"; head -30 "$work/trace.txt"
  echo "test_killed_run: $failures failure(s)"
  exit 1
fi
echo "test_killed_run ($ranks ranks): passed"
