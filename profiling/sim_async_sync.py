#!/usr/bin/python3
"""The table (and with a PNG path, the figure) of profiling/sim_async_sync.sh:
    sim_async_sync.py OUT_DIR PNG|"" POOL..."""
import os
import sys

from sim_runs import cpu_share, pyplot, save, seconds_per_version, summary, trainer_wait

out, png, pools = sys.argv[1], sys.argv[2], [int(n) for n in sys.argv[3:]]
rows = {}
print(f"{'rollout ranks':>13} {'mode':>5} {'s/version':>9} {'trainer wait':>12} {'traj/s':>7} {'stale':>6}"
      f" {'CPU: all':>8} {'rollout':>7}")
for n in pools:
    for mode in ("async", "sync"):
        run = os.path.join(out, f"{mode}_{n}")
        if not os.path.exists(f"{run}/summary.json"):
            continue
        s = summary(run)
        rows[mode, n] = (seconds_per_version(run), trainer_wait(run))
        print(f"{n:>13} {mode:>5} {rows[mode, n][0]:>9.2f} {rows[mode, n][1]:>12.3f} "
              f"{s['rollout_trajectories_per_s']:>7.1f} {s['stale_dropped']:>6}"
              f" {cpu_share(run):>8.2f} {cpu_share(run, 'rollout'):>7.2f}")
    if ("async", n) in rows and ("sync", n) in rows:
        print(f"{n:>13} sync / async time per version: {rows['sync', n][0] / rows['async', n][0]:.2f}")
if png:
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    for mode, marker in (("async", "o"), ("sync", "s")):
        ns = [n for n in pools if (mode, n) in rows]
        left.plot(ns, [rows[mode, n][0] for n in ns], marker=marker, label=mode)
        right.plot(ns, [rows[mode, n][1] for n in ns], marker=marker, label=mode)
    left.set_ylabel("seconds per version")
    right.set_ylabel("trainer wait fraction")
    left.set_yscale("log")
    save(fig, (left, right), "simulated long-tailed workload: async against colocated sync", png,
         "rollout ranks (async; sync has one more)")
