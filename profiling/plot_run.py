#!/usr/bin/python3
"""Plots of one astraflow run folder, from its HDF5 files alone (docs/analysis.md).

    profiling/plot_run.py RUN_DIR [OUT_DIR] [--window START:END]
                                   (OUT_DIR defaults to RUN_DIR/plots; the timeline shows
                                    START..END seconds, default the 10 s around mid-run)

Reads RUN_DIR/trace.h5 and RUN_DIR/trajectories.h5 (and summary.json when present) with
h5py and matplotlib from the project's .venv (profiling/plot_run.sh runs it) and writes:

  timeline.png     per-rank Gantt of generate / wait / train / weight-pull / publish events
  accuracy.png     mean training reward per version (trajectories.h5) and held-out eval
                   accuracy per evaluation round (trace `eval` events: solved / problems)
  wait.png         each trainer's wait fraction per version (batch_wait vs train_step)
  staleness.png    histogram of the staleness of consumed trajectories
  weights.png      bytes per weight pull and per publish, when the trace has them

A run that was killed has no trace.h5: its per-rank files (RUN_DIR/trace/rank_*.h5) are read
as the last flush left them (run.flush_seconds). A missing or unreadable file stops with one
line naming it.
"""
import json
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def fail(message):
    print(f"plot_run: {message}", file=sys.stderr)
    sys.exit(2)


def open_h5(path, fmt):
    import h5py

    if not os.path.exists(path):
        fail(f"{path}: no such file")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        fail(f"{path}: not a readable HDF5 file ({e})")
    if f.attrs.get("format", b"") not in (fmt, fmt.encode()):
        fail(f"{path}: not an astraflow {fmt.split('-')[-1]} file")
    return f


def trace_files(run):
    """trace.h5 when the run ended; else the per-rank files of a killed run, as they are."""
    merged = os.path.join(run, "trace.h5")
    folder = os.path.join(run, "trace")
    if os.path.exists(merged) or not os.path.isdir(folder):
        return [merged]
    names = sorted(n for n in os.listdir(folder) if n.endswith(".h5") and n.startswith(("rank_", "spawn")))
    if not names:
        fail(f"{merged}: no such file, and no per-rank file in {folder}")
    print(f"plot_run: no trace.h5 (a killed run?): reading {len(names)} per-rank files in {folder}", file=sys.stderr)
    return [os.path.join(folder, n) for n in names]


# The kinds these plots read; each must be one the writer declares (the file's `kinds`
# attribute, from core/trace_kinds.hpp), so a renamed kind fails here instead of leaving a plot
# silently empty.
KINDS_READ = {"generate", "eval_generate", "task_wait", "batch_wait", "train_step", "weight_pull", "weight_stage",
              "publish", "serve_batch", "eval", "batch_staleness", "delta"}


def check_kinds(path, f):
    if "kinds" not in f.attrs:
        return  # written before the attribute existed
    declared = f.attrs["kinds"]
    declared = set((declared.decode() if isinstance(declared, bytes) else str(declared)).split(","))
    unknown = sorted(KINDS_READ - declared)
    if unknown:
        fail(f"{path}: this trace declares no event kind {', '.join(unknown)} (plot_run.py and the writer disagree)")


def load_events(run):
    out = []
    for path in trace_files(run):
        f = open_h5(path, "astraflow-trace")
        check_kinds(path, f)
        try:
            ev = f["events"][:]
        except Exception as e:  # truncated datasets raise here
            fail(f"{path}: events unreadable ({e})")
        for r in ev:
            out.append(
                {
                    "rank": int(r["rank"]),
                    "role": r["role"].decode(),
                    "kind": r["kind"].decode(),
                    "t0": float(r["t_start"]),
                    "t1": float(r["t_end"]),
                    "version": int(r["version"]),
                    "bytes": int(r["bytes"]),
                    "count": int(r["count"]),
                    "policy": int(r["policy"]),
                    "total": int(r["total"]),
                    "staleness": int(r["staleness"]),
                }
            )
    out.sort(key=lambda e: e["t0"])
    return out


def save(fig, out, name):
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=90)
    plt.close(fig)


COLORS = {
    "generate": "#4c72b0",
    "eval_generate": "#8172b3",
    "task_wait": "#dddddd",
    "batch_wait": "#dd8452",
    "train_step": "#55a868",
    "weight_pull": "#c44e52",
    "weight_stage": "#937860",
    "publish": "#da8bc3",
    "serve_batch": "#8c8c8c",
}


def plot_timeline(events, out, window):
    if window is None:
        mid = (min(e["t0"] for e in events) + max(e["t1"] for e in events)) / 2
        window = (mid - 5, mid + 5)
    events = [e for e in events if e["t1"] >= window[0] and e["t0"] <= window[1]]
    ranks = sorted({e["rank"] for e in events})
    labels = {}
    fig, ax = plt.subplots(figsize=(11, 0.5 + 0.45 * len(ranks)))
    for kind, color in COLORS.items():
        bars = defaultdict(list)
        for e in events:
            if e["kind"] == kind:
                bars[e["rank"]].append((e["t0"], max(e["t1"] - e["t0"], 1e-3)))
                labels[e["rank"]] = e["role"]
        for rank, spans in bars.items():
            ax.broken_barh(spans, (rank - 0.4, 0.8), facecolors=color, label=kind if rank == min(bars) else None)
    ax.set_yticks(ranks)
    ax.set_yticklabels([f"{r} {labels.get(r, '')}" for r in ranks])
    ax.invert_yaxis()
    ax.set_xlim(*window)
    ax.set_xlabel("seconds since the run started")
    ax.set_title(f"per-rank timeline, {window[0]:.1f}–{window[1]:.1f} s")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    save(fig, out, "timeline.png")


def plot_accuracy(run, events, out):
    t = open_h5(os.path.join(run, "trajectories.h5"), "astraflow-trajectories")
    reward = t["reward"][:]
    version = t["weight_version_min"][:]
    sums, counts = defaultdict(float), defaultdict(int)
    for v, r in zip(version, reward):
        if r == r:  # NaN: no reward
            sums[int(v)] += float(r)
            counts[int(v)] += 1
    vs = sorted(sums)
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(vs, [sums[v] / counts[v] for v in vs], lw=1, label="mean training reward (by generating version)")
    rounds = sorted((e["version"], e["count"] / e["total"]) for e in events if e["kind"] == "eval" and e["total"])
    if rounds:
        ax.plot([v for v, _ in rounds], [a for _, a in rounds], "o-", label="held-out greedy accuracy")
    ax.set_xlabel("weight version")
    ax.set_ylim(0, 1)
    ax.legend()
    ax.set_title("reward and evaluation accuracy")
    save(fig, out, "accuracy.png")


def plot_wait(events, out):
    fig, ax = plt.subplots(figsize=(8, 3.5))
    trainers = sorted({e["rank"] for e in events if e["role"] == "trainer"})
    for rank in trainers:
        wait, step = defaultdict(float), defaultdict(float)
        for e in events:
            if e["rank"] != rank:
                continue
            if e["kind"] == "batch_wait":
                wait[e["version"]] += e["t1"] - e["t0"]
            elif e["kind"] == "train_step":
                step[e["version"] - 1] += e["t1"] - e["t0"]  # the step from version v-1 to v
        vs = sorted(set(wait) & set(step))
        ax.plot(vs, [wait[v] / max(wait[v] + step[v], 1e-9) for v in vs], lw=1, label=f"trainer rank {rank}")
    ax.set_xlabel("trainer version")
    ax.set_ylabel("wait fraction")
    ax.set_ylim(0, 1)
    ax.legend()
    ax.set_title("trainer wait fraction per version")
    save(fig, out, "wait.png")


def plot_staleness(events, out):
    hist = defaultdict(int)
    for e in events:
        if e["kind"] == "batch_staleness":
            hist[e["staleness"]] += e["count"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ks = sorted(hist)
    ax.bar(ks, [hist[k] for k in ks])
    ax.set_xlabel("staleness (trainer version − generating version)")
    ax.set_ylabel("consumed trajectories")
    ax.set_title("staleness of consumed data")
    save(fig, out, "staleness.png")


def plot_weights(events, out):
    pulls = [(e["version"], e["bytes"]) for e in events if e["kind"] == "weight_pull" and e["bytes"]]
    stages = [(e["version"], e["bytes"]) for e in events if e["kind"] == "weight_stage" and e["bytes"]]
    deltas = [(e["version"], e["bytes"], e["count"]) for e in events if e["kind"] == "delta"]
    if not pulls and not stages:
        return False
    panels = 2 if deltas and stages else 1
    fig, axes = plt.subplots(panels, 1, figsize=(8, 3.5 * panels), squeeze=False)
    ax = axes[0][0]
    if stages:
        ax.plot(*zip(*sorted(stages)), ".", ms=3, label="full version staged by the trainer")
    if deltas:
        ax.plot([d[0] for d in deltas], [d[1] for d in deltas], ".", ms=3, label="its delta (encoded by the store)")
    if pulls:
        ax.plot(*zip(*sorted(pulls)), ".", ms=3, label="pulled by a rollout rank")
    ax.set_xlabel("weight version")
    ax.set_ylabel("bytes")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("weight bytes per version")
    if panels == 2:
        words = max(b for _, b in stages) / 2.0  # the packed version is bf16 words
        ax = axes[1][0]
        ax.plot([d[0] for d in deltas], [100.0 * d[2] / words for d in deltas], ".", ms=3)
        ax.set_xlabel("weight version")
        ax.set_ylabel("changed bf16 elements (%)")
        ax.set_ylim(bottom=0)
        ax.set_title("delta density per version")
    save(fig, out, "weights.png")
    return True


def main():
    args = sys.argv[1:]
    window = None
    if "--window" in args:
        i = args.index("--window")
        try:
            window = tuple(float(x) for x in args[i + 1].split(":"))
            assert len(window) == 2 and window[0] < window[1]
        except (IndexError, ValueError, AssertionError):
            fail("--window wants START:END in seconds, START < END")
        del args[i : i + 2]
    if not args:
        fail("usage: plot_run.py RUN_DIR [OUT_DIR] [--window START:END]")
    run = args[0]
    out = args[1] if len(args) > 1 else os.path.join(run, "plots")
    os.makedirs(out, exist_ok=True)
    events = load_events(run)
    if not events:
        fail(f"{os.path.join(run, 'trace.h5')}: no events")
    plot_timeline(events, out, window)
    plot_accuracy(run, events, out)
    plot_wait(events, out)
    plot_staleness(events, out)
    written = ["timeline.png", "accuracy.png", "wait.png", "staleness.png"]
    if plot_weights(events, out):
        written.append("weights.png")
    summary = os.path.join(run, "summary.json")
    if os.path.exists(summary):
        s = json.load(open(summary))
        print(f"plot_run: {run}: {s.get('versions')} versions, eval {s.get('eval_accuracy_start')} → "
              f"{s.get('eval_accuracy_end')}")
    print(f"plot_run: wrote {', '.join(written)} to {out}")


if __name__ == "__main__":
    main()
