#!/usr/bin/env bash
# An OpenEnv environment in a real mpirun job (examples/openenv_guess, written with openenv-core):
# each rollout rank starts its own server (or, with ASTRAFLOW_OPENENV_SERVER_PER=node, the node's
# rollout ranks share the one the first of them starts), every episode is a session of its own on
# /ws, and the servers are killed (SIGKILL) mid-run: the episodes in flight end with reason
# env_error (counted), the servers are started again (each rank's, or one for the node), the run
# finishes and the books balance.
#   test_openenv_run.sh <astraflow binary> <source dir> <mpiexec> <python with openenv-core> <ranks: 3|4>
set -uo pipefail
bin=$1 src=$2 mpiexec=$3 python=$4 ranks=$5
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; pkill -9 -f "$work/guess_server.py" 2>/dev/null; rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

rollouts=$((ranks - 2))
server_per=${ASTRAFLOW_OPENENV_SERVER_PER:-rank}
servers_expected=$rollouts
[ "$server_per" = node ] && servers_expected=1
"$bin" init-model "$work/model" --hidden-size 16 --layers 1 --heads 2 --kv-heads 1 --intermediate-size 32 \
  --max-positions 512 >/dev/null || fail "init-model"
# A copy of the example server: this run's servers are the processes running this path.
cp "$src/examples/openenv_guess/server.py" "$work/guess_server.py"
sed -e "s#hf: runs/openenv_guess/model#hf: $work/model#" -e "s#output_dir: runs/openenv_guess#output_dir: $work/run#" \
  -e "s#\[.venv/bin/python, examples/openenv_guess/server.py#[$python, $work/guess_server.py#" \
  -e "s#ranks: 2}#ranks: $rollouts}#" -e "s#^    reward: sum#    reward: sum\n    server_per: $server_per#" \
  "$src/examples/openenv_guess/config.yaml" >"$work/config.yaml"
grep -q "server_per: $server_per" "$work/config.yaml" || fail "server_per was not set"
grep -q "$work/guess_server.py" "$work/config.yaml" || fail "the example config's command was not rewritten"

"$mpiexec" -n "$ranks" --oversubscribe "$bin" run "$work/config.yaml" --set run.max_wall_seconds=20 \
  --set eval.problems=8 --set eval.every=1000 --set rollout.max_new_tokens=4 --set run.progress_every=2 \
  --set rollout.batch_tasks=8 --set rollout.group_size=4 --set trainer.groups_per_step=4 \
  >"$work/out" 2>"$work/err" &
job=$!
# Kill every server once each rank's server has answered its health check (a server killed while
# it starts is a failed start, retried at once, not a revival) and the ranks have played a while.
servers=0
for _ in $(seq 1 600); do
  servers=$(grep -c "environment.openenv: server .* answers at" "$work/err")
  if [ "$servers" -ge "$servers_expected" ] && grep -q "player v2 " "$work/err"; then break; fi
  sleep 0.2
done
[ "$servers" -eq "$servers_expected" ] || fail "expected $servers_expected servers answering, found $servers"
if [ "$server_per" = node ]; then
  grep -q "using the node's server" "$work/err" || fail "no rank took the node's server"
fi
pkill -9 -f "$work/guess_server.py" || fail "no server to kill"
timeout 180 bash -c "while kill -0 $job 2>/dev/null; do sleep 0.5; done" || fail "the run did not end"
wait $job || fail "mpirun exited $?: $(tail -n 5 "$work/err")"

logs=$(ls "$work/run/openenv/"openenv-*.log 2>/dev/null | wc -l)
"$python" - "$work/run/summary.json" "$rollouts" "$server_per" "$logs" <<'PY' || fail "summary checks (above)"
import json, sys
s, rollouts, server_per, logs = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
bad = []
def check(ok, what):
    if not ok: bad.append(what)
ranks = [r for r in s["ranks"] if r["role"] == "rollout"]
check(len(ranks) == rollouts, f"{rollouts} rollout ranks: {len(ranks)}")
reasons = s["reward_reasons"]
check(sum(reasons.values()) == s["produced"] > 0, f"every episode has a reason: {reasons} vs {s['produced']}")
check(reasons["correct"] + reasons["wrong"] > 0, f"episodes were played to their end: {reasons}")
# Each rank's server was killed and started again. Episodes in flight at the kill end env_error; a
# rank caught between episodes has none in flight (its next reset is retried on the new server).
restarts = [r["openenv_restarts"] for r in ranks]
if server_per == "rank":
    check(all(n >= 1 for n in restarts), f"each rank's server started again: {restarts}")
else:
    # One server for the node: one start, then one per death, by whichever rank saw it first.
    check(sum(restarts) >= 1, f"the node's server started again: {restarts}")
    check(logs == 1 + sum(restarts), f"one server log per start: {logs} logs, restarts {restarts}")
check(all(r["openenv_errors"] >= 1 for r in ranks), f"the kill was seen: {[r['openenv_errors'] for r in ranks]}")
check(all(r["openenv_sessions"] > 0 and r["openenv_steps"] > r["openenv_sessions"] for r in ranks),
      f"every rank played multi-turn episodes: {[(r['openenv_sessions'], r['openenv_steps']) for r in ranks]}")
check(sum(r["openenv_errors"] for r in ranks) >= reasons["env_error"], "errors counted")
# openenv runs its environment work on environment threads (rollout.environment_threads auto):
# each episode's reset and its answers went to them.
check(all(r["environment_jobs"] > r["openenv_sessions"] > 0 for r in ranks),
      f"environment work on threads: {[(r['environment_jobs'], r['openenv_sessions']) for r in ranks]}")
check(all(0 <= r["stream_steps_beside_environment"] <= r["stream_steps"] for r in ranks), "stream steps counted")
check(sum(r["pushed"] for r in ranks) == s["produced"], "pushed == produced")
check(s["accepted"] == s["consumed"] + s["buffered"], f"accepted = consumed + buffered: {s['accepted']}, {s['consumed']}, {s['buffered']}")
check(s["produced"] == s["accepted"] + s["filtered"] + s["stale_dropped"] + s["malformed"] + s["unroutable"],
      "produced = accepted + filtered + stale + malformed + unroutable")
check(s["eval_accuracy_end"] is not None, "held-out games were played")
if bad:
    print("\n".join(bad))
    sys.exit(1)
PY
ls "$work/run/openenv/"openenv-*.log >/dev/null 2>&1 || fail "no server logs under run/openenv"

# An environment server whose program cannot run: no MPI_ABORT. Each rollout rank logs the error
# naming environment.openenv.command once (not once per episode in flight), fails the episodes it
# started (env_error), leaves its pool, and the run ends with its summary.
"$mpiexec" -n "$ranks" --oversubscribe "$bin" run "$work/config.yaml" --set run.output_dir="$work/broken" \
  --set 'environment.openenv.command=[/nonexistent/python, "{port}"]' --set run.max_wall_seconds=120 \
  --set eval.problems=0 --set rollout.batch_tasks=8 >"$work/broken.out" 2>"$work/broken.err" ||
  fail "a broken environment command ended the job with rc $?: $(grep -m 3 -i 'abort\|error' "$work/broken.err")"
said=$(grep -c "environment.openenv.command: cannot run /nonexistent/python" "$work/broken.err")
[ "$said" -ge 1 ] && [ "$said" -le "$rollouts" ] || fail "the start failure was logged $said times for $rollouts ranks"
"$python" - "$work/broken/summary.json" "$rollouts" <<'PY' || fail "broken-command summary checks (above)"
import json, sys
s, rollouts = json.load(open(sys.argv[1])), int(sys.argv[2])
ranks = [r for r in s["ranks"] if r["role"] == "rollout"]
assert len(ranks) == rollouts and all(r["server_lost"] == 1 for r in ranks), [r["server_lost"] for r in ranks]
assert s["versions"] == 0, s["versions"]
assert s["produced"] == s.get("reward_reasons", {}).get("env_error", 0), (s["produced"], s["reward_reasons"])
PY

if [ $failures -ne 0 ]; then
  echo "--- stderr (tail)"; tail -n 40 "$work/err"
  echo "test_openenv_run: $failures failure(s)"
  exit 1
fi
echo "test_openenv_run ($ranks ranks): passed"
