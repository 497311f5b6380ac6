#!/usr/bin/env python3
"""Reads an evaluation table (eval.h5) with h5py and checks it against what the test knows.

usage: eval_table_check.py EVAL_H5 SETS_JSON [SUMMARY_JSON RUN_DIR]
SETS_JSON: {"set name": {"answers": [reference of row 0, row 1, ...] or null, "problems": n, "samples": k}}
Every check asserts; the last line printed is "ok" when all hold.
"""
import filecmp
import json
import math
import os
import sys

import h5py
import numpy as np


def expected_reward(reference):
    r = int(reference)
    return {0: 1.0, 1: 0.5}.get(r % 3)  # None: decided by the response


def main():
    path, sets = sys.argv[1], json.loads(sys.argv[2])
    f = h5py.File(path, "r")
    assert f.attrs["format"] == "astraflow-eval", f.attrs["format"]
    rounds = {k: f["rounds"][k][:] for k in f["rounds"]}
    s = {k: f["sets"][k][:] for k in f["sets"]}
    p = {k: f["problems"][k][:] for k in f["problems"]}
    rewards = f["samples/reward"][:]
    responses = f["samples/response"].asstr()[:]
    set_names = [n.decode() for n in s["name"]]
    p_set = [n.decode() for n in p["set"]]
    answers = [a.decode() for a in p["answer"]]
    n_rounds = len(rounds["round"])
    assert list(rounds["round"]) == list(range(n_rounds)), rounds["round"]
    # One weight version per round.
    assert (rounds["version_low"] == rounds["version"]).all(), (rounds["version_low"], rounds["version"])
    assert len(rewards) == len(responses)
    for r in range(n_rounds):
        in_round = [i for i in range(len(set_names)) if s["round"][i] == r]
        assert sorted(set_names[i] for i in in_round) == sorted(sets), (r, [set_names[i] for i in in_round])
        accuracies = []
        for i in in_round:
            name = set_names[i]
            want = sets[name]
            rows = [j for j in range(len(p_set)) if p["round"][j] == r and p_set[j] == name]
            assert len(rows) == want["problems"] == s["problems"][i], (name, len(rows), want, s["problems"][i])
            assert s["samples"][i] == want["samples"], (name, s["samples"][i])
            means, solved = [], []
            for k, j in enumerate(rows):
                assert p["index"][j] == k, (name, k, p["index"][j])
                if want["answers"] is not None:
                    assert answers[j] == want["answers"][k], (name, k, answers[j], want["answers"][k])
                n = int(p["samples"][j])
                assert n == want["samples"], (name, k, n)
                offset = int(p["sample_offset"][j])
                got = rewards[offset : offset + n]
                assert len(got) == n and all(math.isfinite(x) for x in got), got
                e = expected_reward(answers[j])
                if e is not None:
                    assert all(x == e for x in got), (name, k, answers[j], list(got))
                else:
                    assert all(x in (0.0, 1.0) for x in got), list(got)
                assert abs(p["mean_reward"][j] - np.mean(got)) < 1e-12, (p["mean_reward"][j], got)
                assert p["solved"][j] == int(any(x >= 1.0 for x in got))
                means.append(np.mean(got))
                solved.append(any(x >= 1.0 for x in got))
            assert abs(s["accuracy"][i] - np.mean(means)) < 1e-12, (name, s["accuracy"][i], np.mean(means))
            assert abs(s["pass_at_k"][i] - np.mean(solved)) < 1e-12, (name, s["pass_at_k"][i])
            accuracies.append(s["accuracy"][i])
        assert abs(rounds["mean_accuracy"][r] - np.mean(accuracies)) < 1e-12, (rounds["mean_accuracy"][r], accuracies)
    assert any(len(t) > 0 for t in responses), "every recorded response is empty"
    if len(sys.argv) > 3:
        summary = json.load(open(sys.argv[3]))
        run_dir = sys.argv[4]
        last = n_rounds - 1
        assert summary["eval_rounds"] == n_rounds, (summary["eval_rounds"], n_rounds)
        assert summary["eval_version_end"] == rounds["version"][last]
        for i in range(len(set_names)):
            if s["round"][i] == last:
                assert abs(summary["eval_sets"][set_names[i]]["accuracy"] - s["accuracy"][i]) < 1e-12
        assert abs(summary["eval_accuracy_end"] - rounds["mean_accuracy"][last]) < 1e-12
        # keep_best: the earliest round at a version > 0 with the highest mean.
        later = [r for r in range(n_rounds) if rounds["version"][r] > 0]
        best = max(later, key=lambda r: (rounds["mean_accuracy"][r], -r))
        v = int(rounds["version"][best])
        assert summary["eval_best_version"] == v, (summary["eval_best_version"], v)
        best_json = json.load(open(os.path.join(run_dir, "checkpoints", "best.json")))
        assert best_json["version"] == v, best_json
        for policy, name in best_json["files"].items():
            kept = os.path.join(run_dir, "checkpoints", name)
            source = os.path.join(run_dir, "checkpoints", "step_%d.%s.h5" % (v, policy))
            assert filecmp.cmp(kept, source, shallow=False), (kept, source)
    print("ok")


if __name__ == "__main__":
    main()
