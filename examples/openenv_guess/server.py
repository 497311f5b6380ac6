"""Guess the number: a small multi-turn OpenEnv environment (openenv-core 0.3).

The environment thinks of a number between 1 and `high` (drawn from the reset's seed, so a seed is
always the same game) and the agent has a few turns to find it; after each wrong guess it says
"higher" or "lower". Reward: 1 for the right number, 0 otherwise; the episode ends at the right
guess or after `turns` guesses.

Run it yourself:
    python3 examples/openenv_guess/server.py --port 8000
or let each astraflow rollout rank start its own (examples/openenv_guess/config.yaml):
    environment.openenv.command: [python3, examples/openenv_guess/server.py, --port, "{port}"]
"""

import argparse
import random
import re
from typing import Any, Optional
from uuid import uuid4

import uvicorn
from pydantic import Field

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State


class GuessAction(Action):
    message: str = Field(..., description="The agent's turn; its first whole number is the guess")


class GuessObservation(Observation):
    prompt: str = Field(default="", description="What the environment says to the agent")
    guesses_left: int = Field(default=0, description="Guesses the agent has left")


class GuessState(State):
    secret: int = 0
    guesses_left: int = 0


class GuessEnvironment(Environment):
    # Each WebSocket session gets its own instance: episodes never share a game.
    SUPPORTS_CONCURRENT_SESSIONS: bool = True
    HIGH = 16
    TURNS = 4

    def __init__(self):
        super().__init__()
        self._state = GuessState(episode_id=str(uuid4()))

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              high: Optional[int] = None, turns: Optional[int] = None, **kwargs: Any) -> GuessObservation:
        high = int(high or self.HIGH)
        turns = int(turns or self.TURNS)
        secret = random.Random(seed).randint(1, high)
        self._state = GuessState(episode_id=episode_id or str(uuid4()), secret=secret, guesses_left=turns)
        text = (f"I am thinking of a whole number from 1 to {high}. You have {turns} guesses; after each wrong "
                f"one I say whether my number is higher or lower. Answer with the number only.")
        return GuessObservation(prompt=text, guesses_left=turns, done=False, reward=0.0)

    def step(self, action: GuessAction, timeout_s: Optional[float] = None, **kwargs: Any) -> GuessObservation:
        s = self._state
        s.step_count += 1
        s.guesses_left -= 1
        match = re.search(r"-?\d+", action.message)
        if match is None:
            reply, correct = "That is not a number. Answer with the number only.", False
        else:
            guess = int(match.group())
            correct = guess == s.secret
            reply = "Correct!" if correct else ("Higher." if guess < s.secret else "Lower.")
        done = correct or s.guesses_left <= 0
        if not correct and done:
            reply += f" No guesses left; the number was {s.secret}."
        return GuessObservation(prompt=reply, guesses_left=s.guesses_left, done=done, reward=1.0 if correct else 0.0)

    @property
    def state(self) -> GuessState:
        return self._state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--sessions", type=int, default=256, help="concurrent WebSocket sessions allowed")
    args = parser.parse_args()
    app = create_app(GuessEnvironment, GuessAction, GuessObservation, env_name="guess_number",
                     max_concurrent_envs=args.sessions)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", ws_max_size=16 << 20)


if __name__ == "__main__":
    main()
