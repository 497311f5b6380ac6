#!/usr/bin/env python3
"""Writes the text-native demo's dataset (configs/text_math.yaml, docs/tasks.md): short
natural-language addition and subtraction word problems as JSONL prompt rows,

  {"prompt": "Ann has 23 pens. She buys 14 more. How many pens does Ann have now?",
   "answer": "37", "solution": "23+14=\\boxed{37}", "op": "+", "difficulty": 2}

train.jsonl and eval.jsonl never share an arithmetic problem (the pair of numbers and the
operator): a held-out problem is one the policy has not seen in any wording. Deterministic for a
seed. Standard library only.
"""
import argparse
import json
import os
import random

NAMES = [("Ann", "She"), ("Ben", "He"), ("Carla", "She"), ("Dev", "He"), ("Eva", "She"), ("Finn", "He"),
         ("Gita", "She"), ("Hugo", "He"), ("Iris", "She"), ("Jon", "He")]
ITEMS = ["apples", "pens", "books", "coins", "cards", "shells", "stamps", "marbles", "eggs", "cups"]
ADD = [
    "{n} has {a} {i}. {p} buys {b} more. How many {i} does {n} have now?",
    "There are {a} {i} in a box. {n} puts in {b} more. How many {i} are in the box?",
    "{n} found {a} {i} on Monday and {b} on Tuesday. How many {i} did {n} find?",
]
SUB = [
    "{n} had {a} {i} and gave {b} away. How many {i} does {n} have left?",
    "A shop had {a} {i}. It sold {b}. How many {i} are left?",
    "{n} needs {a} {i} and has {b}. How many more {i} does {n} need?",
]


def held_out(a, op, b):
    # A fixed mixing of the problem itself, not of Python's per-process string hash.
    return (a * 7919 + b * 104729 + (1 if op == "-" else 0) * 1299709) % 10 == 0


def row(rng, a, op, b):
    name, pronoun = rng.choice(NAMES)
    text = rng.choice(ADD if op == "+" else SUB).format(n=name, p=pronoun, i=rng.choice(ITEMS), a=a, b=b)
    result = a + b if op == "+" else a - b
    return {"prompt": text, "answer": str(result), "solution": f"{a}{op}{b}=\\boxed{{{result}}}", "op": op,
            "difficulty": max(len(str(a)), len(str(b)))}


def operand(rng, top):
    # The digit count first, then the value within it (as the arithmetic environment draws them):
    # one-digit operands are as common as two-digit ones, so the small cases the carries build
    # on are well covered.
    digits = rng.randint(1, len(str(top)))
    return rng.randint(1 if digits == 1 else 10 ** (digits - 1), min(top, 10 ** digits - 1))


def problems(rng, count, want_held_out, top):
    out, seen = [], set()
    while len(out) < count:
        op = rng.choice("+-")
        a, b = operand(rng, top), operand(rng, top)
        if op == "-" and b > a:
            a, b = b, a
        if held_out(a, op, b) != want_held_out:
            continue
        r = row(rng, a, op, b)
        if r["prompt"] in seen:
            continue
        seen.add(r["prompt"])
        out.append(r)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for train.jsonl and eval.jsonl")
    ap.add_argument("--train", type=int, default=20000)
    ap.add_argument("--eval", type=int, default=400)
    ap.add_argument("--max", type=int, default=99, help="operands are 1..max")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    for name, count, held in (("train", a.train, False), ("eval", a.eval, True)):
        tmp = os.path.join(a.out, name + ".jsonl.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for r in problems(rng, count, held, a.max):
                f.write(json.dumps(r) + "\n")
        os.replace(tmp, os.path.join(a.out, name + ".jsonl"))


if __name__ == "__main__":
    main()
