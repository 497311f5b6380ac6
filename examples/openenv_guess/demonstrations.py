"""Demonstrations for the guessing game's warm start (environment.openenv.demonstrations).

Plays each training seed's game with the environment itself (server.py's GuessEnvironment, no
server needed) by binary search — guess the middle of what is left, then move up or down with
the hint — and writes one JSONL row per game: {"seed": 3, "actions": ["8", "12", "10"]}.
`astraflow sft` plays these turns against the real server and trains on them.

    .venv/bin/python examples/openenv_guess/demonstrations.py --out runs/openenv_guess/demonstrations.jsonl
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server import GuessAction, GuessEnvironment  # noqa: E402


def play(seed: int, high: int, turns: int) -> list:
    env = GuessEnvironment()
    observation = env.reset(seed=seed, high=high, turns=turns)
    low, top, actions = 1, high, []
    while not observation.done:
        guess = (low + top) // 2
        actions.append(str(guess))
        observation = env.step(GuessAction(message=str(guess)))
        if observation.prompt.startswith("Higher"):
            low = guess + 1
        elif observation.prompt.startswith("Lower"):
            top = guess - 1
    return actions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--games", type=int, default=2000, help="seeds 0 .. games-1")
    parser.add_argument("--high", type=int, default=16, help="as the config's reset: {high}")
    parser.add_argument("--turns", type=int, default=5, help="as the config's reset: {turns}")
    args = parser.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as out:
        for seed in range(args.games):
            out.write(json.dumps({"seed": seed, "actions": play(seed, args.high, args.turns)}) + "\n")


if __name__ == "__main__":
    main()
