#!/usr/bin/env bash
# Elastic rollout end to end (docs/elastic.md): real mpirun jobs whose dataflow rank spawns
# rollout ranks with MPI_Comm_spawn and retires them, driven by an external maintainer command
# that answers a target pool size for each balance report.
#   test_elastic.sh <astraflow binary> <source dir> <mpiexec> spawn_retire|simulated|servers|fault
#   spawn_retire: 2 rollout ranks, +2 spawned at v4, the 2 retired at v12; training continues
#                 across both, the books balance, no leased task is left unanswered.
#   simulated:    the same with simulated pools and a simulated trainer (docs/simulation.md): the
#                 spawned ranks generate with the pool's simulated backend too.
#   servers:      the same with a pool that launches an `astraflow serve` per rank (backend.launch):
#                 every rank, spawned or not, generates on a server it started; none outlives it.
#   fault:        2 spawned at v2, both frozen (SIGSTOP) at v6, one killed (SIGKILL) at v8; the run
#                 finishes, the books balance, the lost pool's tasks were re-issued. Weights go
#                 through the node relay here (pretend nodes of one rank, a chain, deltas): the
#                 killed rank is its spawned pool's relay root, frozen with the rank below it, so
#                 the pool is lost as a whole (as a node is whose relaying rank dies) while the
#                 layout's own pool relays throughout (rollout_relayed_deltas > 0).
set -uo pipefail
bin=$1 src=$2 mpiexec=$3 mode=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The maintainer: the report's version decides; otherwise it keeps the current size.
# In the fault case it is also the one that hurts the spawned pool, so the freeze and the kill
# land at fixed points of the run (the dataflow loop waits for the maintainer): at v6 it freezes
# both of the pool's ranks (SIGSTOP, as with a hung node: the tasks the dataflow rank goes on
# leasing to the pool fill its ring and stay unanswered), at v8 it kills the first (SIGKILL).
# Freezing one rank only is not enough: the other drains the ring, and a kill that finds both
# idle finds nothing leased (seen: 0 tasks re-issued, correctly).
if [ "$mode" = fault ]; then grow=2 shrink=-1 versions=40; else grow=4 shrink=12 versions=20; fi
extra=()
if [ "$mode" = simulated ]; then
  extra=(--set "layout.2.backend={kind: simulated, lengths: {kind: geometric, mean: 4}, decode_tokens_per_second: 400}"
         --set "trainer.simulate={fixed_seconds: 0.05, weight_bytes: 1000000}" --set eval.problems=0)
fi
if [ "$mode" = servers ]; then
  # The pool launches an `astraflow serve` per rank (backend.launch): the spawned ranks start
  # their own, and stop them when retired.
  extra=(--set "layout.2.backend={kind: http, api: openai, weights_dir: $work/w, launch: {command: [\"$bin\", serve, \"{model}\", --port, \"{port}\"]}}")
fi
if [ "$mode" = fault ]; then
  export ASTRAFLOW_NODE_RANKS=1
  extra=(--set weights.relay_fanout=1 --set weights.mode=delta)
fi
cat >"$work/maintainer.sh" <<SH
#!/bin/sh
v=\$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['version'])" "\$1")
g=\$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['production']['total_raas_ranks'])" "\$1")
if [ "$mode" = fault ] && { [ "\$v" = 6 ] || [ "\$v" = 8 ]; }; then
  pids=\$(grep -o "spawned pool spawn0 with 2 rollout rank(s) (pids [0-9,]*" "$work/err" | grep -o "[0-9,]*\$")
  if [ -n "\$pids" ]; then
    if [ "\$v" = 6 ]; then kill -STOP \$(echo "\$pids" | tr , ' '); else kill -9 "\${pids%%,*}"; fi
    echo "v\$v: signalled \$pids" >>"$work/signals"
  fi
fi
if [ "\$v" = $grow ]; then echo \$((g + 2)); elif [ "\$v" = $shrink ]; then echo \$((g - 2)); else echo \$g; fi
SH
chmod +x "$work/maintainer.sh"

timeout 300 "$mpiexec" --enable-recovery -n 4 --oversubscribe "$bin" run "$src/configs/quickstart.yaml" \
  --set run.output_dir="$work/run" --set sft.checkpoint="$work/none.h5" --set run.versions=$versions \
  --set run.max_wall_seconds=200 --set eval.problems=40 --set eval.every=10 --set elastic.every=2 \
  --set elastic.mode=external --set elastic.command="$work/maintainer.sh" --set elastic.lease_seconds=30 \
  "${extra[@]}" >"$work/out" 2>"$work/err" &
job=$!
wait $job
rc=$?
if [ "$mode" = fault ]; then
  [ "$(wc -l <"$work/signals" 2>/dev/null)" = 2 ] || fail "the maintainer froze the pool and killed a rank: $(cat "$work/signals" 2>&1)"
fi
[ $rc -eq 0 ] || fail "the run exited $rc: $(tail -c 1200 "$work/err")"

python3 - "$work/run" "$mode" "$versions" <<'PY' || fail "summary checks (above)"
import json, os, sys
run, mode, versions = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = json.load(open(f"{run}/summary.json"))
df = [r for r in s["ranks"] if r["role"] == "dataflow"][0]
bad = []
def check(ok, what):
    if not ok: bad.append(what)
check(s["versions"] == versions, f"the run reached v{versions}: {s['versions']}")
check(s["produced"] == s["accepted"] + s["filtered"] + s["stale_dropped"], "produced = accepted + filtered + stale")
check(s["accepted"] == s["consumed"] + s["buffered"], "accepted = consumed + buffered")
check(df["elastic_spawned_ranks"] == 2, f"2 ranks spawned: {df['elastic_spawned_ranks']}")
reports = sorted(f for f in os.listdir(f"{run}/balance") if f.endswith(".json"))
check(len(reports) == versions // 2, f"a balance report every 2 versions: {reports}")
spawned = [r for r in s["ranks"] if r["label"].startswith("rollout:spawn")]
if mode != "fault":
    check(df["elastic_retired_ranks"] == 2, f"2 ranks retired: {df['elastic_retired_ranks']}")
    check(df["elastic_lost_ranks"] == 0, "none lost")
    check(df["elastic_unreturned_tasks"] == 0, f"every task leased to the pool came back: {df['elastic_unreturned_tasks']}")
    check(len(spawned) == 2 and all(r["pushed"] > 0 for r in spawned), f"both spawned ranks produced: {spawned}")
    pushed = sum(r["pushed"] for r in s["ranks"] if r["role"] == "rollout")
    check(pushed == s["produced"], f"every rollout rank's trajectories reached the dataflow rank: {pushed} vs {s['produced']}")
    trainer = [r for r in s["ranks"] if r["role"] == "trainer"][0]
    check(trainer["trajectories_trained"] == s["consumed"], "the trainer trained what was consumed")
    grown = [json.load(open(f"{run}/balance/{f}")) for f in reports]
    check(any(r["production"]["total_raas_ranks"] == 4 for r in grown), "a window ran with 4 rollout ranks")
    if mode == "servers":
        rollout = [r for r in s["ranks"] if r["role"] == "rollout"]
        check(all(r["backend_server_starts"] == 1 and r["backend_requests"] > 0 for r in rollout),
              f"each rollout rank, spawned or not, generated on a server it started: {rollout}")
        logs = [f for f in os.listdir(f"{run}/servers") if f.startswith("openai-")]
        check(len(logs) == 4, f"four servers started: {logs}")
else:
    check(df["elastic_lost_ranks"] >= 1, f"the pool was lost: {df['elastic_lost_ranks']}")
    check(df["elastic_tasks_reissued"] > 0, f"its tasks were re-issued: {df['elastic_tasks_reissued']}")
    relayed = s["weights"]["policies"]["solver"]["rollout_relayed_deltas"]
    check(relayed > 0, f"the relay carried deltas: {relayed}")
    check(os.path.exists(f"{run}/trace.h5"), "trace.h5 written")
if bad:
    print("\n".join(bad))
    sys.exit(1)
PY
grep -q "spawned pool spawn0 with 2 rollout rank" "$work/err" || fail "no spawn logged"
if [ "$mode" != fault ]; then
  grep -q "pool spawn0 retired and disconnected" "$work/err" || fail "no retirement logged"
else
  grep -q "lost pool spawn0" "$work/err" || fail "the loss was not logged"
fi
if [ "$mode" = servers ] && pgrep -f "serve $work/w/" >/dev/null; then fail "servers outlived their ranks"; fi
if [ $failures -ne 0 ]; then
  echo "--- elastic log lines"; grep "elastic:" "$work/err" | head -n 20
  echo "--- stderr (tail)"; tail -n 30 "$work/err"
  echo "test_elastic $mode: $failures failure(s)"
  exit 1
fi
echo "test_elastic $mode: passed"
