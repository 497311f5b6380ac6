#!/usr/bin/python3
"""The table (and with a PNG path, the figure) of profiling/sim_autoscale.sh:
    sim_autoscale.py OUT_DIR PNG|"" """
import os
import sys

import numpy as np
from sim_runs import events, pyplot, rollout_rank_seconds, save, summary, trainer_wait

out, png = sys.argv[1], sys.argv[2]
rows = {}
for name in ("small", "large", "auto"):
    run = os.path.join(out, name)
    if not os.path.exists(f"{run}/summary.json"):
        print(f"{name}: no summary (see {run}.log)")
        continue
    s = summary(run)
    df = [r for r in s["ranks"] if r["role"] == "dataflow"][0]
    rows[name] = dict(wall=s["wall_seconds"], rank_s=rollout_rank_seconds(run), wait=trainer_wait(run),
                      spawned=int(df.get("elastic_spawned_ranks", 0)), retired=int(df.get("elastic_retired_ranks", 0)),
                      stale=s["stale_dropped"], run=run)
print(f"{'run':<6} {'wall s':>8} {'rollout rank-s':>15} {'trainer wait':>13} {'spawned':>8} {'retired':>8}"
      f" {'stale':>6} {'wall/large':>11} {'rank-s/large':>13}")
base = rows.get("large")
for name, r in rows.items():
    ratio = (f"{r['wall'] / base['wall']:>11.3f} {r['rank_s'] / base['rank_s']:>13.3f}" if base else "")
    print(f"{name:<6} {r['wall']:>8.1f} {r['rank_s']:>15.1f} {r['wait']:>13.3f} {r['spawned']:>8} {r['retired']:>8}"
          f" {r['stale']:>6} {ratio}")
if png and rows:
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    for name, r in rows.items():
        pub = np.sort(events(r["run"], "publish")["t_start"])
        gen = events(r["run"], "generate")
        # Ranks generating in each version's interval: the pool size the run held then.
        live = [len(np.unique(gen["rank"][(gen["t_end"] > a) & (gen["t_start"] < b)])) for a, b in zip(pub, pub[1:])]
        left.plot(range(1, len(live) + 1), live, label=name)
        right.plot(range(1, len(pub)), np.diff(pub), label=name)
    left.set_ylabel("rollout ranks generating")
    right.set_ylabel("seconds per version")
    save(fig, (left, right), "simulated lengthening workload: three-zone autoscaling against fixed pools", png,
         "version", log2=False)
