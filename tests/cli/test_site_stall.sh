#!/usr/bin/env bash
# A remote site that stops reading must not stop the home run (docs/cross-site.md, "Slow and
# stalled sites"). A home job (dataflow, trainer, one local rollout rank) waits for one site;
# tests/cli/stalled_gateway joins, takes credit, asks for 64 full weight versions at once and
# never reads again. The home rank queues what its outbox budget allows (here up to 64 MiB, more
# than the loopback socket buffers take), goes on ingesting, serving and publishing for its local
# pool, declares the site lost after cross_site.stall_seconds (its tasks re-issued) and ends the
# run with every version trained. With a blocking send the home rank would wait on the site
# forever and `timeout` would fail this test.
#   test_site_stall.sh <astraflow binary> <stalled_gateway binary> <source dir> <mpiexec>
set -uo pipefail
bin=$1 gateway=$2 src=$3 mpiexec=$4
work=$(mktemp -d)
gw_pid=
trap '[ -n "$gw_pid" ] && kill "$gw_pid" 2>/dev/null; [ -z "${KEEP:-}" ] && rm -rf "$work"; echo "work: $work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -e "s|output_dir: .*|output_dir: $work/home|" -e "s|checkpoint: runs/quickstart/sft.h5|checkpoint: $work/none.h5|" \
    -e "s|listen: .*|listen: 127.0.0.1:$port|" "$src/configs/cross_site_home.yaml" >"$work/home.yaml"
export ASTRAFLOW_SITE_TOKEN=stall-secret-$RANDOM

"$gateway" "$work/home.yaml" 127.0.0.1 "$port" 64 240 >"$work/gateway.out" 2>"$work/gateway.err" &
gw_pid=$!
timeout 300 "$mpiexec" -n 3 --oversubscribe "$bin" run "$work/home.yaml" \
  --set run.versions=12 --set eval.problems=24 --set eval.every=6 --set cross_site.wait_seconds=90 \
  --set cross_site.stall_seconds=4 --set cross_site.outbox_bytes=67108864 \
  >"$work/home.out" 2>"$work/home.err"
rc=$?
[ $rc -eq 0 ] || fail "home: exit $rc (124: it hung on the stalled site): $(tail -c 1200 "$work/home.err")"
grep -q "reading nothing" "$work/gateway.out" || fail "the stalled gateway did not join: $(cat "$work/gateway.err")"
grep -q "lost site 'stalled'" "$work/home.err" || fail "home did not declare the site lost: $(grep -i site "$work/home.err" | tail -5)"

python3 - "$work/home/summary.json" <<'PY' || fail "summary (above)"
import json, sys
s = json.load(open(sys.argv[1]))
bad = []
def check(ok, what):
    if not ok: bad.append(what)
xs = s["cross_site"]
check(xs["joined"] == 1 and xs["lost"] == 1 and xs["stalled"] == 1, f"the site joined, stalled and was lost: {xs}")
site = xs["sites"]["stalled"]
check(site["max_queued_bytes"] > 4 << 20, f"home queued more than the socket buffers take: {site}")
check(site["weight_updates"] >= 2, f"home answered several of the requests before the budget held it: {site}")
check(s["versions"] == 12, f"every version was trained: {s['versions']}")
check(s["produced"] == s["accepted"] + s["filtered"] + s["stale_dropped"], "produced = accepted + filtered + stale")
check(s["accepted"] == s["consumed"] + s["buffered"], "accepted = consumed + buffered")
local = [r for r in s["ranks"] if r["role"] == "rollout"]
check(local and local[0]["pushed"] > 0, "the local pool produced")
if bad:
    print("\n".join(bad))
    sys.exit(1)
PY

if [ $failures -ne 0 ]; then
  echo "--- home stderr (tail)"; tail -n 30 "$work/home.err"
  exit 1
fi
echo "test_site_stall: passed"
