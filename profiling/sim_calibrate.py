#!/usr/bin/python3
"""Fits the simulated backend's and trainer's cost models to real runs, and compares a simulated
run with a real one (docs/simulation.md, profiling/sim_calibrate.sh).

    sim_calibrate.py fit FREE RUN_DIR...   prints the fitted keys as two --set values (FREE: a
                                           simulated run with a cost-free accelerator)
    sim_calibrate.py compare REAL SIM      prints time per version of both and their ratio

Reads each run's trajectories.h5 and trace.h5 with h5py (the project's .venv).

The engine batches continuously: every step decodes each running sequence by a token and admits
waiting ones. From each run's summary (its rollout rank's generate seconds, less the episode work
a simulated rank still does, and the engine's counters), the time is fitted as
prompt tokens / prefill rate + steps / decode rate + (slowdown / decode rate) × (decode rows −
steps), least squares with every coefficient >= 0 over the runs given. The trainer's step is fitted as f + s × (the tokens through its forward passes, padding included),
over each run's mean step (f >= 0).
"""
import itertools
import sys

import h5py
import numpy as np
from sim_runs import events, seconds_per_version, summary, trainer_wait


def rollout_totals(run):
    """The rollout ranks' summed figures: generate seconds, episodes, prompt tokens a sequence
    brings (prefilled, shared with its group or taken from its previous turn: the simulator charges
    them all), engine steps and decode rows."""
    ranks = [r for r in summary(run)["ranks"] if r["role"] == "rollout"]
    total = lambda key: float(sum(r.get(key, 0) for r in ranks))  # noqa: E731
    prompt = total("engine_prefill_tokens") + total("engine_shared_prompt_tokens") + total("engine_reused_context_tokens")
    return {"seconds": total("generate_seconds"), "episodes": total("pushed") + total("eval_pushed"),
            "prompt": prompt, "steps": total("engine_steps"), "decode": total("engine_decode_tokens")}


def line(x, y):
    """Least-squares y = f + s x with f >= 0 (a negative intercept is refitted through 0)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    (f, s), *_ = np.linalg.lstsq(np.stack([np.ones(len(x)), x], 1), y, rcond=None)
    return (f, s) if f >= 0 else (0.0, float(np.dot(x, y) / np.dot(x, x)))


def nonnegative_fit(a, y):
    """Least squares a x = y with x >= 0: the best of the fits on each subset of the columns."""
    best = (np.inf, np.zeros(a.shape[1]))
    for mask in itertools.product([False, True], repeat=a.shape[1]):
        cols = [i for i, m in enumerate(mask) if m]
        if not cols:
            continue
        sub, *_ = np.linalg.lstsq(a[:, cols], y, rcond=None)
        if np.any(sub < 0):
            continue
        x = np.zeros(a.shape[1])
        x[cols] = sub
        err = float(np.sum((a @ x - y) ** 2))
        if err < best[0]:
            best = (err, x)
    return best[1]


def fit(runs, free_run):
    free = rollout_totals(free_run)
    episode_work = free["seconds"] / free["episodes"]  # the episode work a simulated rank does for real
    rows, ys = [], []
    steps_t, steps_tok = [], []
    for run in runs:
        t = rollout_totals(run)
        # The continuous engine's time: prompts at a prefill rate, and per step
        # (1 + slowdown × (k − 1)) / decode rate for k rows, so over a run
        # prompt / prefill + steps / decode + (slowdown / decode) × (decode rows − steps).
        rows.append([t["prompt"], t["steps"], t["decode"] - t["steps"]])
        ys.append(t["seconds"] - episode_work * t["episodes"])
        # Per run: the mean step against the mean tokens through the forward passes (padding
        # included), the quantity trainer.simulate costs; the trace's events carry only the
        # generated tokens.
        trainer = [r for r in summary(run)["ranks"] if r["role"] == "trainer"][0]
        steps = events(run, "train_step")
        steps_t.append(float(np.mean(steps["t_end"] - steps["t_start"])))
        steps_tok.append(trainer["forward_tokens"] / trainer["steps"])
    a, y = np.array(rows), np.array(ys)
    per_prompt, per_step, per_row = nonnegative_fit(a, y)
    f, s = line(steps_tok, steps_t)
    if per_step <= 0:
        sys.exit("sim_calibrate: the generate fit leaves no decode step time: give runs of different lengths")
    resid = y - a @ np.array([per_prompt, per_step, per_row])
    for run, row, yi, r in zip(runs, rows, ys, resid):
        print(f"# {run}: {yi:.2f} s generating (episode work out), prompt tokens {row[0]:.0f}, steps {row[1]:.0f}, "
              f"mean rows a step {1 + row[2] / row[1]:.2f}; residual {r:+.2f} s", file=sys.stderr)
    print(f"# generate: {per_prompt * 1e6:.2f} us per prompt token + {per_step * 1e3:.3f} ms per step "
          f"+ {per_row * 1e3:.3f} ms per extra row in it", file=sys.stderr)
    print(f"# the simulated rank's own episode work: {episode_work * 1e3:.2f} ms per episode", file=sys.stderr)
    print(f"# train steps ({len(runs)} runs): {f:.4f} s + {s * 1e6:.2f} us per forward token", file=sys.stderr)
    prefill = f"{min(1e9, 1.0 / per_prompt):.6g}" if per_prompt > 0 else "1e9"  # 0: folded into the steps
    backend = (f"batching: continuous, batch_limit: 256, batch_slowdown: {per_row / per_step:.6g}, "
               f"prefill_tokens_per_second: {prefill}, decode_tokens_per_second: {1.0 / per_step:.6g}")
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
