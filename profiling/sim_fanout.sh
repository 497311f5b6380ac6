#!/usr/bin/env bash
# The weight store's pull fan-out (docs/simulation.md): profiling/bench_weight_fanout at each
# reader count: N readers pull one version from the store on the dataflow rank.
#   profiling/sim_fanout.sh [megabytes=16] [reader counts...=8 32 128 256] [--plot PNG]
# Prints per N the time from the publish to the last reader holding the version, for the full
# version (round 0) and for deltas (the mean of 5 rounds at 5 % of the words changed), and the
# bytes all readers moved per second. Installs Debian's python3-matplotlib for --plot.
set -uo pipefail
source "$(dirname "$0")/sim_lib.sh"
sim_parse "$@"
mb=${args[0]:-16}
counts=("${args[@]:1}")
[ ${#counts[@]} -eq 0 ] && counts=(8 32 128 256)
[ -n "$plot" ] && sim_need_python
sim_workdir sim_fanout
for n in "${counts[@]}"; do
  echo "sim_fanout: $n readers ..." >&2
  mpirun --oversubscribe -np $((n + 2)) "$here/build/bin/bench_weight_fanout" "$mb" 5 0.05 >"$out/$n.txt" 2>&1 ||
    { echo "$n readers failed:"; tail -5 "$out/$n.txt"; }
done
/usr/bin/python3 - "$out" "$plot" "$mb" "${counts[@]}" <<'PY'
import sys
out, png, mb, counts = sys.argv[1], sys.argv[2], sys.argv[3], [int(n) for n in sys.argv[4:]]
rows = {}
for n in counts:
    full, deltas, moved = None, [], []
    for line in open(f"{out}/{n}.txt"):
        f = line.split()
        if len(f) == 6 and f[0].isdigit():
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
