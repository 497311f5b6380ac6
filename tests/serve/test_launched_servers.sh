#!/usr/bin/env bash
# Servers a pool starts itself (layout[i].backend.launch, docs/rollout-backends.md, "Servers the
# pool starts"), with `astraflow serve` as the server program:
#  - per rank (api openai): each rollout rank starts its own server from the policy's first
#    version; one is killed in the middle of the run: its rank starts it again, the episodes its
#    requests failed go back and are re-issued, the new server loads the version the rank holds,
#    and the run reaches its last version with the books balanced; every server is gone after it.
#  - per node (api sglang): the node's two rollout ranks share one server.
#  - a server that crashes at every weight update is given up after launch.max_restarts, and its
#    rank leaves the pool while an engine pool finishes the run.
# Run at 4 and 5 ranks (2 and 3 rollout ranks).
#   test_launched_servers.sh <astraflow binary> <source dir> <mpiexec> <python>
set -uo pipefail
bin=$1 src=$2 mpiexec=$3 python=$4
work=${ASTRAFLOW_TEST_DIR:-$(mktemp -d)}
cleanup() {
  pkill -f "$work/" 2>/dev/null
  [ -n "${ASTRAFLOW_TEST_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
die() { echo "FAIL: $*"; exit 1; }

config() {  # config <name> <rollout ranks> <backend> [versions] [mode]
  cat <<YAML
run: {name: $1, output_dir: $work/$1, seed: 3, threads_per_rank: 1, versions: ${4:-6}, mode: ${5:-sync}}
policies:
  - name: solver
    model: {d_model: 32, layers: 1, heads: 2, kv_heads: 1, ffn_hidden: 64, max_seq_len: 24}
layout:
  - {role: dataflow, ranks: 1}
  - {role: trainer, policy: solver, ranks: 1}
  - {role: rollout, policies: [solver], ranks: $2, backend: $3}
environment: {name: arithmetic, digits: 1, operators: "+"}
rollout: {group_size: 4, max_new_tokens: 4, batch_tasks: 16}
trainer: {groups_per_step: 4}
sft: {max_steps: 30, checkpoint: $work/sft.h5}
YAML
}
run() {  # run <name> <ranks>
  timeout 300 "$mpiexec" -n "$2" --oversubscribe "$bin" run "$work/$1.yaml" >"$work/$1.log" 2>&1 ||
    { tail -n 30 "$work/$1.log"; die "run $1"; }
}

config warm 2 "{kind: engine}" >"$work/warm.yaml"
"$bin" sft "$work/warm.yaml" >"$work/sft.log" 2>&1 || { tail "$work/sft.log"; die "sft"; }

for rollout in 2 3; do
  name=rank$rollout
  config $name $rollout "{kind: http, api: openai, weights_dir: $work/$name/w, retries: 1, backoff_seconds: 0.05, launch: {command: [\"$bin\", serve, \"{model}\", --port, \"{port}\"], per: rank, start_seconds: 120}}" 150 async \
    >"$work/$name.yaml"
  # A second after every rank's server runs (the run lasts several), one server is killed.
  ( for _ in $(seq 1 1200); do
      [ -e "$work/$name/summary.json" ] && break
      [ "$(pgrep -f "serve $work/$name/w/" | wc -l)" -ge "$rollout" ] && sleep 1 && break
      sleep 0.1
    done
    victim=$(pgrep -f "serve $work/$name/w/" | head -n 1)
    [ -n "$victim" ] && kill -9 "$victim" && echo "$victim" >"$work/$name.killed" ) &
  killer=$!
  run $name $((rollout + 2))
  wait "$killer"
  [ -s "$work/$name.killed" ] || die "$name: no server was killed"
  [ "$(pgrep -f "serve $work/$name/w/" | wc -l)" -eq 0 ] || die "$name: servers outlived the run"
  "$python" - "$work" "$name" "$rollout" <<'PY' || die "$name checks"
import json, sys, glob
work, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = json.load(open(f"{work}/{name}/summary.json"))
rollout = [r for r in s["ranks"] if r["role"] == "rollout"]
d = [r for r in s["ranks"] if r["role"] == "dataflow"][0]
total = lambda k: sum(r[k] for r in rollout)
assert len(rollout) == count, rollout
assert s["versions"] == 150, s["versions"]
assert all(r["backend_server_starts"] == 1 and r["server_lost"] == 0 for r in rollout), rollout
assert total("backend_server_restarts") == 1, [r["backend_server_restarts"] for r in rollout]
# One log per start: a server per rank, and the one started again.
assert len(glob.glob(f"{work}/{name}/servers/openai-*.log")) == count + 1
assert max(int(r["final_version.solver"]) for r in rollout) == 150, rollout
assert total("failed_episodes") == total("tasks_returned") == d["tasks_returned"] <= d["tasks_reissued"], (d, rollout)
assert s["produced"] == s["accepted"] + s["filtered"] + s["stale_dropped"], s
diff = [r for r in s["ranks"] if r["role"] == "trainer"][0]["max_abs_behav_diff"]
# Episodes whose requests the dead server failed, and updates it missed, before it was up again.
print(json.dumps({name: {"returned": d["tasks_returned"], "updates_missed": total("backend_weight_update_failures"),
                         "max_abs_behav_diff": diff}}))
PY
done

config node 2 "{kind: http, api: sglang, weights_dir: $work/node/w, launch: {command: [\"$bin\", serve, \"{model}\", --port, \"{port}\"], per: node}}" \
  >"$work/node.yaml"
run node 4
"$python" - "$work" <<'PY' || die "node checks"
import json, sys, glob
work = sys.argv[1]
s = json.load(open(f"{work}/node/summary.json"))
rollout = [r for r in s["ranks"] if r["role"] == "rollout"]
assert s["versions"] == 6, s["versions"]
assert len(glob.glob(f"{work}/node/servers/sglang-*.log")) == 1  # one server for the node
assert all(r["backend_server_starts"] == 1 and r["failed_episodes"] == 0 for r in rollout), rollout
assert max(int(r["final_version.solver"]) for r in rollout) == 6, rollout
PY
# A server that crashes at every weight update (as vLLM's engine does on a model its CPU kernels do
# not take): started again max_restarts times, then given up; its rank leaves its pool at once and
# an engine pool beside it finishes the run.
cat >"$work/crash.py" <<'PY'
import http.server, os, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def do_POST(self):
        os._exit(3)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
PY
config crash 1 "{kind: http, api: openai, weights_dir: $work/crash/w, retries: 0, launch: {command: [\"$python\", \"$work/crash.py\", \"{port}\", \"{model}\"], max_restarts: 2}}" 8 \
  | sed 's/^  - {role: rollout, policies: \[solver\], ranks: 1, backend:/  - {role: rollout, policies: [solver], ranks: 1}\n&/' \
  >"$work/crash.yaml"
run crash 4
"$python" - "$work" <<'PY' || die "crash checks"
import json, sys, glob
work = sys.argv[1]
s = json.load(open(f"{work}/crash/summary.json"))
http = [r for r in s["ranks"] if r["role"] == "rollout" and r["backend_server_starts"] == 1]
assert s["versions"] == 8, s["versions"]
assert len(http) == 1 and http[0]["backend_server_restarts"] == 2 and http[0]["server_lost"] == 1, http
assert len(glob.glob(f"{work}/crash/servers/openai-*.log")) == 3  # the first start and two more
PY
grep -q "max_restarts): given up" "$work/crash.log" && grep -q "given up after 2 restarts.*leaving the pool" \
  "$work/crash.log" || die "the give-up is not logged"
echo PASS
