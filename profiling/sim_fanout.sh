#!/usr/bin/env bash
# The weight store's pull fan-out (docs/simulation.md): profiling/bench_weight_fanout at each
# reader count: N readers pull one version from the store on the dataflow rank.
#   profiling/sim_fanout.sh [megabytes=16] [reader counts...=8 32 128 256] [--plot PNG] [--node-ranks K]
#                           [--fanout F] [--weights full|delta]
# Prints per N the time from the publish to the last reader holding the version, for the full
# version (round 0) and for deltas (the mean of 5 rounds at 5 % of the words changed), and the
# bytes all readers moved per second. With --node-ranks K each N also runs three times in
# weights.mode full (every round a full version; --weights delta: rounds 1-5 are deltas), side by
# side: every reader pulling for itself; readers sharing a copy per pretend node of K
# (ASTRAFLOW_NODE_RANKS=K, one pull per node, all from the store, docs/weights.md); and the same
# nodes with versions relayed down a tree of F children per node (default 2). For each: round 0's
# time (every slot's pages touched for the first time), the mean of the steady rounds (1-5; with
# --weights delta 2-5, as round 1 fills each node's second slot in full) and the megabytes the
# store served in round 0 and, per round, in the steady rounds. Uses the project's .venv python (requirements/profiling.txt).
set -uo pipefail
source "$(dirname "$0")/sim_lib.sh"
sim_parse "$@"
mb=${args[0]:-16}
counts=("${args[@]:1}")
[ ${#counts[@]} -eq 0 ] && counts=(8 32 128 256)
sim_need_python
sim_workdir sim_fanout
k=${opt[node-ranks]:-}
fanout=${opt[fanout]:-2}
weights=${opt[weights]:-full}
case "$weights" in full | delta) ;; *) echo "sim_fanout: --weights $weights; allowed: full, delta" >&2; exit 2 ;; esac
for n in "${counts[@]}"; do
  echo "sim_fanout: $n readers ..." >&2
  mpirun --oversubscribe -np $((n + 2)) "$here/build/bin/bench_weight_fanout" "$mb" 5 0.05 >"$out/$n.txt" 2>&1 ||
    { echo "$n readers failed:"; tail -5 "$out/$n.txt"; }
  if [ -n "$k" ]; then
    # Pretend nodes of k readers: the host and trainer ranks (0, 1) are not readers, so they
    # only shift the grouping of the readers' communicator, which starts at rank 2.
    for mode in reader node relay; do
      ASTRAFLOW_NODE_RANKS=$k mpirun --oversubscribe -x ASTRAFLOW_NODE_RANKS -np $((n + 2)) \
        "$here/build/bin/bench_weight_fanout" "$mb" 5 0.05 $mode "$fanout" "$weights" >"$out/$n.$mode.txt" 2>&1 ||
        { echo "$n readers, $mode failed:"; tail -5 "$out/$n.$mode.txt"; }
    done
  fi
done
if [ -n "$k" ]; then
  "$py" - "$out" "$k" "$fanout" "$weights" "${counts[@]}" <<'PY'
import sys
out, k, fanout, weights = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
counts = [int(n) for n in sys.argv[5:]]
def rounds(path):
    """Per round: seconds until every reader holds it, MB the store served."""
    rows = []
    try:
        for line in open(path):
            f = line.split()
            if len(f) == 7 and f[0].isdigit():
                rows.append((float(f[3]), float(f[6])))
    except OSError:
        pass
    return rows
def mean(xs):
    return sum(xs) / len(xs)
# The steady state: rounds 1-5 in full mode; in delta mode rounds 2-5 (round 1 fills each node's
# second slot, still empty, with a full version).
first = 1 if weights == "full" else 2
what = "full versions" if weights == "full" else "a full version, then deltas"
steady = f"rounds {first}-5"
print(f"{what}: per reader, one pull per pretend node of {k} from the store, relayed (fanout {fanout})")
print(f"{'readers':>8} {'round 0 s: reader':>18} {'node':>7} {'relayed':>8}"
      f" {steady + ' s: reader':>21} {'node':>7} {'relayed':>8} {'reader/relayed':>15}"
      f" {'store MB 0: reader':>19} {'node':>6} {'relayed':>8} {steady + ': reader':>17} {'node':>6} {'relayed':>8}")
for n in counts:
    r = [rounds(f"{out}/{n}.{m}.txt") for m in ("reader", "node", "relay")]
    if all(len(x) > first for x in r):
        cold = [x[0][0] for x in r]
        warm = [mean([t for t, _ in x[first:]]) for x in r]
        served = [x[0][1] for x in r]
        later = [mean([m for _, m in x[first:]]) for x in r]
        print(f"{n:>8} {cold[0]:>18.3f} {cold[1]:>7.3f} {cold[2]:>8.3f} {warm[0]:>21.3f} {warm[1]:>7.3f} {warm[2]:>8.3f}"
              f" {warm[0] / warm[2]:>15.1f} {served[0]:>19.0f} {served[1]:>6.0f} {served[2]:>8.0f}"
              f" {later[0]:>17.1f} {later[1]:>6.1f} {later[2]:>8.1f}")
PY
fi
"$py" - "$out" "$plot" "$mb" "${counts[@]}" <<'PY'
import sys
out, png, mb, counts = sys.argv[1], sys.argv[2], sys.argv[3], [int(n) for n in sys.argv[4:]]
rows = {}
for n in counts:
    full, deltas, moved = None, [], []
    for line in open(f"{out}/{n}.txt"):
        f = line.split()
        if len(f) == 7 and f[0].isdigit():
            if f[1] == "full":
                full = (float(f[3]), float(f[5]))
            else:
                deltas.append(float(f[3]))
                moved.append(float(f[2]))
    if full and deltas:
        rows[n] = (full[0], full[1], sum(deltas) / len(deltas), sum(moved) / len(moved))
print(f"{mb} MB versions")
print(f"{'readers':>8} {'full: all updated s':>20} {'full agg GB/s':>14} {'delta: all updated s':>21} {'delta MB/reader':>16}")
for n, r in rows.items():
    print(f"{n:>8} {r[0]:>20.3f} {r[1]:>14.2f} {r[2]:>21.4f} {r[3]:>16.3f}")
if png and rows:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ns = sorted(rows)
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.plot(ns, [rows[n][0] for n in ns], marker="o", label=f"full version ({mb} MB)")
    ax.plot(ns, [rows[n][2] for n in ns], marker="s", label="delta (5 % changed)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("readers pulling one version")
    ax.set_ylabel("seconds until all hold it")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"figure: {png}")
PY
