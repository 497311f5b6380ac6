#!/usr/bin/env python3
"""Math answers graded by Hugging Face's math-verify (requirements/test.txt), the reference
tests/tasks/test_math_parity.cpp compares astraflow's `math` reward with:

    math_verify_reference.py IN.jsonl OUT.jsonl

IN.jsonl holds {"response", "reference"} per line; OUT.jsonl gets {"correct": bool} per line, in
order. The grading is verl's `math_verify` reward (verl/utils/reward_score/math_verify.py): the
reference boxed and read with LaTeX extraction, the response read with expression and LaTeX
extraction, then `verify`.
"""
import json
import logging
import sys
import time

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify


def grade(response, reference):
    try:
        gold = parse("\\boxed{" + reference + "}", extraction_config=[LatexExtractionConfig()])
        answer = parse(response, extraction_config=[ExprExtractionConfig(), LatexExtractionConfig()])
        return bool(gold) and bool(answer) and bool(verify(gold, answer))
    except Exception:  # math-verify's own failures grade as wrong, as verl's reward does
        return False


def main():
    logging.disable(logging.CRITICAL)  # math-verify logs each answer it cannot parse
    source, out = sys.argv[1], sys.argv[2]
    items, seconds = 0, 0.0
    with open(source, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as o:
        for line in f:
            item = json.loads(line)
            start = time.perf_counter()
            correct = grade(item["response"], item["reference"])
            seconds += time.perf_counter() - start
            items += 1
            o.write(json.dumps({"correct": correct}) + "\n")
    # The reference's own cost, printed beside astraflow's by the test (docs/performance.md).
    print(f"math-verify: {items} pairs, {seconds / max(items, 1) * 1e6:.0f} us a pair", file=sys.stderr)


if __name__ == "__main__":
    main()
