#!/usr/bin/env python3
"""The evaluation tests' verifier (persistent `command` reward): a reward the test can predict.

A reference r with r % 3 == 0 gets 1, r % 3 == 1 gets 0.5, whatever the response; r % 3 == 2 gets 1
or 0 by the response's length, so the samples of one problem differ and pass@k means something.
"""
import json
import sys

for line in sys.stdin:
    if not line.strip():
        continue
    task = json.loads(line)
    r = int(task["reference"])
    if r % 3 == 0:
        reward = 1.0
    elif r % 3 == 1:
        reward = 0.5
    else:
        reward = 1.0 if len(task.get("response", "")) % 2 == 0 else 0.0
    print(json.dumps({"reward": reward, "reason": "correct" if reward == 1.0 else "wrong", "answer": str(r)}), flush=True)
