#!/usr/bin/python3
"""Fits the simulated backend's and trainer's cost models to real runs, and compares a simulated
run with a real one (docs/simulation.md, profiling/sim_calibrate.sh).

    sim_calibrate.py fit FREE RUN_DIR...   prints the fitted keys as two --set values (FREE: a
                                           simulated run with a cost-free accelerator)
    sim_calibrate.py compare REAL SIM      prints time per version of both and their ratio

Reads each run's trajectories.h5 and trace.h5 with Debian's python3-h5py.

The engine batches statically: the rows of one generate call step together until the longest
ends. A call is the trajectories of one rank sharing t_started; its time is fitted as
a + b × (its longest generated length), least squares over every call of every run given. The
trainer's step is fitted as f + s × (the tokens through its forward passes, padding included),
over each run's mean step (f >= 0).
"""
import sys

import h5py
import numpy as np
from sim_runs import events, seconds_per_version, summary, trainer_wait


def load_calls(run):
    with h5py.File(f"{run}/trajectories.h5", "r") as f:
        rank = f["producer_rank"][:]
        t0, t1 = f["t_started"][:], f["t_finished"][:]
        mask = f["policy_mask"][:]
        tokens = f["tokens"][:]
    generated = np.array([int(np.sum(m)) for m in mask])
    prompt = np.array([len(t) for t in tokens]) - generated
    calls = {}
    for i in range(len(rank)):
        c = calls.setdefault((int(rank[i]), float(t0[i])), [float(t1[i] - t0[i]), 0, 0, 0])
        c[1] = max(c[1], generated[i])
        c[2] += 1
        c[3] += prompt[i]
    return np.array(list(calls.values()), dtype=float), generated, prompt


def line(x, y):
    """Least-squares y = f + s x with f >= 0 (a negative intercept is refitted through 0)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    (f, s), *_ = np.linalg.lstsq(np.stack([np.ones(len(x)), x], 1), y, rcond=None)
    return (f, s) if f >= 0 else (0.0, float(np.dot(x, y) / np.dot(x, x)))


def overhead(run):
    """Mean seconds of a generate call of a simulated run whose accelerator costs nothing, timed
    as the fit times the real calls (t_started to t_finished): the episode work a simulated rank
    still does for real."""
    return float(np.mean(load_calls(run)[0][:, 0]))


def fit(runs, free_run):
    calls = []
    steps_t, steps_tok = [], []
    for run in runs:
        calls.append(load_calls(run)[0])
        # Per run: the mean step against the mean tokens through the forward passes (padding
        # included), the quantity trainer.simulate costs; the trace's events carry only the
        # generated tokens.
        trainer = [r for r in summary(run)["ranks"] if r["role"] == "trainer"][0]
        steps = events(run, "train_step")
        steps_t.append(float(np.mean(steps["t_end"] - steps["t_start"])))
        steps_tok.append(trainer["forward_tokens"] / trainer["steps"])
    c = np.concatenate(calls)
    (a, b), *_ = np.linalg.lstsq(np.stack([np.ones(len(c)), c[:, 1]], 1), c[:, 0], rcond=None)
    f, s = line(steps_tok, steps_t)
    o = overhead(free_run)
    rows = float(np.mean(c[:, 2]))
    prompt_tokens = float(np.mean(c[:, 3]))
    if a <= o or b <= 0:
        sys.exit(f"sim_calibrate: the generate fit leaves no prefill (a={a:.4g} s, episode work {o:.4g} s, "
                 f"b={b:.4g} s/step): give runs of different lengths")
    resid = c[:, 0] - (a + b * c[:, 1])
    print(f"# {len(c)} generate calls: {a * 1e3:.2f} ms + {b * 1e3:.3f} ms per step "
          f"(rows {rows:.1f}, prompt tokens per call {prompt_tokens:.1f}, residual sd {np.std(resid) * 1e3:.2f} ms)",
          file=sys.stderr)
    print(f"# the simulated rank's own episode work: {o * 1e3:.2f} ms per call", file=sys.stderr)
    print(f"# train steps ({len(runs)} runs): {f:.4f} s + {s * 1e6:.2f} us per forward token", file=sys.stderr)
    # The per-call constant, less the episode work a simulated rank does for real, becomes the
    # prefill of the call's prompt tokens; one step of the
    # static batch is 1 / decode_tokens_per_second (batch_slowdown 0: the calibration holds the
    # batch size, so the slowdown per row is folded into the step).
    backend = (f"batching: static, batch_limit: {int(round(rows))}, batch_slowdown: 0, "
               f"prefill_tokens_per_second: {prompt_tokens / (a - o):.6g}, decode_tokens_per_second: {1.0 / b:.6g}")
    trainer = f"fixed_seconds: {f:.6g}, seconds_per_token: {s:.6g}, weight_bytes: 0"
    print(backend)
    print(trainer)


def per_version(run):
    """Seconds per version, the trainer's wait and the rollout rank's busy seconds per trajectory."""
    gen = events(run, "generate")
    busy = float(np.sum(gen["t_end"] - gen["t_start"])) / max(1, int(np.sum(gen["count"])))
    return seconds_per_version(run), trainer_wait(run), busy


def compare(real, sim):
    r, s = per_version(real), per_version(sim)
    print(f"{'run':<5} {'s/version':>10} {'trainer wait':>13} {'generate ms/traj':>17}")
    for name, v in (("real", r), ("sim", s)):
        print(f"{name:<5} {v[0]:>10.4f} {v[1]:>13.2f} {v[2] * 1e3:>17.3f}")
    print(f"sim / real time per version: {s[0] / r[0]:.3f}")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "fit":
        fit(sys.argv[3:], sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
