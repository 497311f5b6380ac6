#!/usr/bin/env bash
# Cross-site rollout end to end on this machine: a home job (dataflow, trainer, one rollout rank)
# and a remote job (gateway + one rollout rank) as two separate mpiruns that meet only over UCX
# on loopback. A remote with the wrong token fails the link's challenge-response (both sides say
# "authentication failed", home counts it, the token is never printed) and the home run goes
# on; the right one joins over the authenticated link, its pool's trajectories reach the home
# trainer, and its mirrored weights end bit-identical to the trainer's.
#   test_cross_site.sh <astraflow binary> <source dir> <mpiexec>
set -uo pipefail
bin=$1 src=$2 mpiexec=$3
work=$(mktemp -d)
home_pid=
trap '[ -n "$home_pid" ] && kill "$home_pid" 2>/dev/null; rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -e "s|output_dir: .*|output_dir: $work/home|" -e "s|checkpoint: runs/quickstart/sft.h5|checkpoint: $work/none.h5|" \
    -e "s|listen: .*|listen: 127.0.0.1:$port|" "$src/configs/cross_site_home.yaml" >"$work/home.yaml"
sed -e "s|output_dir: .*|output_dir: $work/remote|" -e "s|connect: .*|connect: 127.0.0.1:$port|" \
    "$src/configs/cross_site_remote.yaml" >"$work/remote.yaml"
good=good-secret-$RANDOM bad=bad-secret-$RANDOM

ASTRAFLOW_SITE_TOKEN=$good timeout 300 "$mpiexec" -n 3 --oversubscribe "$bin" run "$work/home.yaml" \
  --set run.versions=8 --set eval.problems=24 --set eval.every=4 --set cross_site.wait_seconds=90 \
  >"$work/home.out" 2>"$work/home.err" &
home_pid=$!

# The wrong token: refused with the reason, a non-zero exit, no hang.
ASTRAFLOW_SITE_TOKEN=$bad timeout 120 "$mpiexec" -n 2 --oversubscribe "$bin" run "$work/remote.yaml" \
  --set cross_site.wait_seconds=60 >"$work/bad.out" 2>"$work/bad.err"
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "remote with a wrong token: exit $rc, wanted a refusal"
grep -q "authentication failed" "$work/bad.err" "$work/bad.out" || fail "remote with a wrong token: no 'authentication failed' reason: $(tail -c 600 "$work/bad.err")"

# The right token: joins, serves, ends with the home run.
ASTRAFLOW_SITE_TOKEN=$good timeout 240 "$mpiexec" -n 2 --oversubscribe "$bin" run "$work/remote.yaml" \
  --set cross_site.wait_seconds=60 >"$work/remote.out" 2>"$work/remote.err"
rc=$?
[ $rc -eq 0 ] || fail "remote: exit $rc: $(tail -c 800 "$work/remote.err")"
wait "$home_pid"
rc=$?
home_pid=
[ $rc -eq 0 ] || fail "home: exit $rc: $(tail -c 800 "$work/home.err")"
grep -q "refused client.*authentication failed" "$work/home.err" || fail "home did not log the refusal: $(grep -i refus "$work/home.err")"
if grep -qF -e "$good" -e "$bad" "$work/home.err" "$work/bad.err" "$work/remote.err"; then
  fail "a token appears in a log"
fi

python3 - "$work/home/summary.json" "$work/remote/summary.json" <<'EOF' || fail "summaries (above)"
import json, sys
home, remote = (json.load(open(p)) for p in sys.argv[1:3])
bad = []
def check(ok, what):
    if not ok: bad.append(what)
xs = home["cross_site"]
check(xs["joined"] == 1 and xs["lost"] == 0, f"one site joined, none lost: {xs}")
check(xs["refused"] >= 1, f"the wrong token was refused: {xs}")
check(xs["auth_failed"] >= 1, f"the refusal was counted as an authentication failure: {xs}")
site = xs["sites"].get("site_b", {})
check(site.get("trajectories", 0) > 1, f"site_b's trajectories reached home: {site}")
trainer = [r for r in home["ranks"] if r["role"] == "trainer"][0]
check(trainer["trajectories_from_remote_sites"] > 0, f"the trainer trained remote trajectories: {trainer['trajectories_from_remote_sites']}")
check(home["produced"] == home["accepted"] + home["filtered"] + home["stale_dropped"], "produced = accepted + filtered + stale")
check(home["accepted"] == home["consumed"] + home["buffered"], "accepted = consumed + buffered")
gw = remote["gateway"]
check(gw["final_version.solver"] == home["versions"], f"gateway mirrored the final version: {gw['final_version.solver']} vs {home['versions']}")
check(gw["weights_hash.solver"] == trainer["weights_hash"], "gateway weights equal the trainer's")
for r in remote["ranks"]:
    if r["role"] == "rollout":
        check(r["weights_hash.solver"] == trainer["weights_hash"], f"remote rollout rank {r['rank']} weights equal the trainer's")
        check(r["pushed"] > 0, "the remote rollout rank produced trajectories")
check(gw["weight_updates.solver"] > gw["weight_full_updates.solver"], f"the mirror moved by deltas at least once: {gw}")
check(gw["weight_updates_rejected.solver"] == 0, "no update rejected")
check(gw["trajectories_forwarded"] == site.get("trajectories"), "every forwarded record arrived")
if bad:
    print("\n".join(bad))
    sys.exit(1)
EOF

if [ $failures -ne 0 ]; then
  echo "--- home stderr (tail)"; tail -n 20 "$work/home.err"
  echo "--- remote stderr (tail)"; tail -n 20 "$work/remote.err"
  echo "test_cross_site: $failures failure(s)"
  exit 1
fi
echo "test_cross_site: passed"
