#!/usr/bin/python3
"""The table (and with a PNG path, the figure) of profiling/sim_ceiling.sh:
    sim_ceiling.py OUT_DIR PNG|"" POOL...
Each rollout rank offers 32 trajectories per modelled second."""
import os
import sys

import numpy as np
from sim_runs import events, pyplot, save, summary

out, png, pools = sys.argv[1], sys.argv[2], [int(n) for n in sys.argv[3:]]
rows = {}
print(f"{'ranks':>6} {'offered/s':>10} {'trained/s':>10} {'trained/offered':>16} {'batches/s':>10}"
      f" {'dataflow cpu':>13} {'task wait':>10} {'pull s/rank':>12}")
for n in pools:
    run = os.path.join(out, f"pool_{n}")
    if not os.path.exists(f"{run}/summary.json"):
        print(f"{n:>6} no summary (see {run}.log)")
        continue
    s = summary(run)
    pub = np.sort(events(run, "publish")["t_start"])
    if len(pub) < 3:
        print(f"{n:>6} {len(pub)} publishes: no steady state")
        continue
    window = pub[-1] - pub[1]
    batches = (len(pub) - 2) / window
    per_batch = s["consumed"] / max(1, s["versions"])
    df = [r for r in s["ranks"] if r["role"] == "dataflow"][0]
    rollouts = [r for r in s["ranks"] if r["role"] == "rollout"]
    wall = df["segment_wall_seconds"]
    task_wait = float(np.mean([r["task_wait_seconds"] for r in rollouts])) / wall
    pull = float(np.mean([r["weight_pull_seconds"] for r in rollouts]))
    offered = 32.0 * n
    trained = batches * per_batch
    rows[n] = (offered, trained, batches, df["cpu_seconds"] / wall, task_wait)
    print(f"{n:>6} {offered:>10.0f} {trained:>10.0f} {trained / offered:>16.3f} {batches:>10.2f}"
          f" {df['cpu_seconds'] / wall:>13.3f} {task_wait:>10.3f} {pull:>12.2f}")
if png and rows:
    plt = pyplot()
    ns = sorted(rows)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    left.plot(ns, [rows[n][0] for n in ns], "--", color="grey", label="offered by the pool")
    left.plot(ns, [rows[n][1] for n in ns], marker="o", label="trained")
    left.set_ylabel("trajectories / s")
    left.set_yscale("log")
    right.plot(ns, [rows[n][3] for n in ns], marker="o", label="dataflow rank CPU share")
    right.plot(ns, [rows[n][4] for n in ns], marker="s", label="rollout task-wait share")
    right.set_ylabel("fraction of wall time")
    save(fig, (left, right), "one dataflow rank: trajectories trained against the load offered", png, "rollout ranks")
