"""What the simulation experiments read from a run folder (docs/simulation.md): its trace.h5
(h5py, from the project's .venv) and summary.json. Imported by profiling/sim_*.py."""
import json
import os

import h5py
import numpy as np


def events(run, kind):
    with h5py.File(f"{run}/trace.h5", "r") as f:
        e = f["events"][:]
    return e[e["kind"] == kind.encode()]


def summary(run):
    with open(f"{run}/summary.json") as f:
        return json.load(f)


def seconds_per_version(run):
    """Steady-state seconds per version: between the second and the next-to-last publish, so
    that the start-up (ranks starting, the first batch filling) and the drain (the last version
    waits for the long tail of the last tasks issued) are left out."""
    pub = np.sort(events(run, "publish")["t_start"])
    if len(pub) < 4:
        raise SystemExit(f"{run}: {len(pub)} publishes; the steady state needs at least 4")
    return float((pub[-2] - pub[1]) / (len(pub) - 3))


def steady_window(run):
    """The steady state's bounds: the second and the next-to-last publish."""
    pub = np.sort(events(run, "publish")["t_start"])
    return pub[1], pub[-2]


def trainer_wait(run):
    """The trainer's share of time spent waiting for a batch, over the steady state."""
    lo, hi = steady_window(run)
    inside = lambda e: e[(e["t_start"] >= lo) & (e["t_start"] < hi)]  # noqa: E731
    steps, waits = inside(events(run, "train_step")), inside(events(run, "batch_wait"))
    st, wt = float(np.sum(steps["t_end"] - steps["t_start"])), float(np.sum(waits["t_end"] - waits["t_start"]))
    return wt / (st + wt)


def cpu_share(run, role=None):
    """The CPU seconds the run's ranks (of one role, or all) used after start-up, over the time
    from the last rank's start-up to the dataflow rank's end and this machine's cores: near 1,
    the ranks were bound by the machine's CPUs rather than by the modelled accelerators, and the
    run measures this machine, not the workload. Start-up (MPI, LibTorch, windows: about a second
    of CPU a rank) is left out: at 128 ranks it would dominate a short run."""
    ranks = summary(run)["ranks"]
    wall = max(r["wall_seconds"] for r in ranks if r["role"] == "dataflow")
    started = float(events(run, "startup")["t_end"].max())
    used = sum(r["cpu_seconds"] - r["startup_cpu_seconds"] for r in ranks if role is None or r["role"] == role)
    return used / ((wall - started) * (os.cpu_count() or 1))


def rollout_rank_seconds(run):
    """Each rollout rank's span from its first to its last event, summed: the accelerator time a
    pool holds (spawned ranks from when they start, retired ones until they leave)."""
    with h5py.File(f"{run}/trace.h5", "r") as f:
        e = f["events"][:]
    # A spawned pool's start-up event is stamped at the run's start, not at the spawn: left out.
    e = e[(e["role"] == b"rollout") & (e["kind"] != b"startup")]
    total = 0.0
    for rank in np.unique(e["rank"]):
        mine = e[e["rank"] == rank]
        total += float(mine["t_end"].max() - mine["t_start"].min())
    return total


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, axes, title, png, xlabel, log2=True):
    """Labels, grids and legends every axis of a figure, and writes it."""
    for ax in axes:
        if log2:
            ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"figure: {png}")
