#!/usr/bin/env python3
"""Writes a small code dataset for the code workflows (configs/code_solver_testgen.yaml,
configs/code_solver_selector.yaml, docs/multi-policy.md): standard-input/standard-output
programming problems as JSONL rows in the `code` reward's format,

  {"prompt": "Read two integers a and b on one line and print a + 3 * b.",
   "tests": [{"input": "2 5\\n", "output": "17\\n"}, ...],
   "solution": "```python\\n...\\n```", "family": "linear"}

with hidden tests computed by a reference solution. Deterministic for a seed; train.jsonl and
eval.jsonl never share a problem. Standard library only.
"""
import argparse
import json
import os
import random


def linear(rng):
    k = rng.randint(2, 9)
    form, f = rng.choice([("a + {k} * b", lambda a, b: a + k * b), ("{k} * a - b", lambda a, b: k * a - b)])
    expr = form.format(k=k)
    prompt = f"Read two integers a and b on one line and print {expr}."
    code = f"a, b = map(int, input().split())\nprint({expr})"
    cases = [(f"{a} {b}\n", f"{f(a, b)}\n") for a, b in ((rng.randint(-50, 50), rng.randint(-50, 50)) for _ in range(4))]
    return prompt, code, cases


def count_char(rng):
    c = rng.choice("aeiouxyz")
    prompt = f"Read one line of lowercase text and print how many times the letter '{c}' occurs in it."
    code = f"print(input().count('{c}'))"
    words = ["banana", "zebra", "xylophone", "queue", "mississippi", "oxygen", "pizza", "yoyo"]
    cases = []
    for _ in range(4):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
        cases.append((text + "\n", f"{text.count(c)}\n"))
    return prompt, code, cases


def max_of(rng):
    n = rng.randint(3, 7)
    which, f = rng.choice([("largest", max), ("smallest", min)])
    prompt = f"The first line holds n = {n}; the second line holds {n} integers. Print the {which} of them."
    code = f"input()\nprint({f.__name__}(map(int, input().split())))"
    cases = []
    for _ in range(4):
        xs = [rng.randint(-100, 100) for _ in range(n)]
        cases.append((f"{n}\n{' '.join(map(str, xs))}\n", f"{f(xs)}\n"))
    return prompt, code, cases


def reverse_words(rng):
    sep = rng.choice([" ", ","])
    name = "spaces" if sep == " " else "commas"
    prompt = f"Read one line of words separated by {name} and print the words in reverse order, separated the same way."
    code = f"print({sep!r}.join(reversed(input().split({sep!r}))))"
    words = ["red", "green", "blue", "cat", "dog", "sun", "moon", "tree"]
    cases = []
    for _ in range(4):
        ws = [rng.choice(words) for _ in range(rng.randint(2, 5))]
        cases.append((sep.join(ws) + "\n", sep.join(reversed(ws)) + "\n"))
    return prompt, code, cases


def digit_sum(rng):
    m = rng.randint(2, 9)
    prompt = f"Read a non-negative integer and print the sum of its digits modulo {m}."
    code = f"print(sum(int(d) for d in input().strip()) % {m})"
    cases = []
    for _ in range(4):
        x = rng.randint(0, 10 ** rng.randint(1, 9))
        cases.append((f"{x}\n", f"{sum(int(d) for d in str(x)) % m}\n"))
    return prompt, code, cases


FAMILIES = [linear, count_char, max_of, reverse_words, digit_sum]


def rows(rng, count, seen):
    # 44 distinct problems in all: asking for more would never end.
    if len(seen) + count > 44:
        raise SystemExit(f"make_code_problems: at most 44 distinct problems (asked for {len(seen) + count})")
    out = []
    while len(out) < count:
        family = rng.choice(FAMILIES)
        prompt, code, cases = family(rng)
        if prompt in seen:
            continue
        seen.add(prompt)
        tests = [{"input": i, "output": o} for i, o in cases]
        out.append({"prompt": prompt, "tests": tests, "solution": f"```python\n{code}\n```",
                    "family": family.__name__})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for train.jsonl and eval.jsonl")
    ap.add_argument("--train", type=int, default=24)
    ap.add_argument("--eval", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    seen = set()
    for name, count in (("train", a.train), ("eval", a.eval)):
        tmp = os.path.join(a.out, name + ".jsonl.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for r in rows(rng, count, seen):
                f.write(json.dumps(r) + "\n")
        os.replace(tmp, os.path.join(a.out, name + ".jsonl"))


if __name__ == "__main__":
    main()
