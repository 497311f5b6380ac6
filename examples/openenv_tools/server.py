"""Guess the number with tools: an MCP-style OpenEnv environment (openenv-core 0.3, MCPEnvironment).

The same game as examples/openenv_guess, played through tools instead of plain text: the agent
lists the tools (ListToolsAction) and calls them (CallToolAction) — `guess(number)` answers
"higher", "lower" or "correct", `guesses_left()` says how many guesses remain. Reward: 1 for the
call that guesses right, 0 otherwise; the episode ends at the right guess or after `turns` guesses.

Run it yourself:
    python3 examples/openenv_tools/server.py --port 8000
or let each astraflow rollout rank start its own (examples/openenv_tools/config.yaml).
"""

import argparse
import random
from typing import Any, Optional
from uuid import uuid4

import uvicorn
from fastmcp import FastMCP

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Action, Observation, State


class GameState(State):
    secret: int = 0
    high: int = 16
    guesses_left: int = 0
    solved: bool = False


class GameObservation(Observation):
    prompt: str = ""  # the reset's text: the game's rules


class GuessToolsEnvironment(MCPEnvironment):
    # Each WebSocket session gets its own instance (and its own FastMCP server): no shared games.
    SUPPORTS_CONCURRENT_SESSIONS: bool = True
    HIGH = 16
    TURNS = 4

    def __init__(self):
        mcp = FastMCP("guess-number")
        self._state = GameState(episode_id=str(uuid4()))

        @mcp.tool()
        def guess(number: int) -> str:
            """Guess the secret number; the answer is "higher", "lower" or "correct"."""
            s = self._state
            if s.guesses_left <= 0 or s.solved:
                return "the game is over"
            s.guesses_left -= 1
            if number == s.secret:
                s.solved = True
                return "correct"
            return "higher" if number < s.secret else "lower"

        @mcp.tool()
        def guesses_left() -> int:
            """How many guesses are left in this game."""
            return self._state.guesses_left

        super().__init__(mcp)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              high: Optional[int] = None, turns: Optional[int] = None, **kwargs: Any) -> Observation:
        high = int(high or self.HIGH)
        turns = int(turns or self.TURNS)
        self._state = GameState(episode_id=episode_id or str(uuid4()), secret=random.Random(seed).randint(1, high),
                                high=high, guesses_left=turns)
        return GameObservation(done=False, reward=0.0,
                               prompt=f"I am thinking of a whole number from 1 to {high}. Find it with the guess "
                                      f"tool; you have {turns} guesses.")

    async def step_async(self, action: Action, timeout_s: Optional[float] = None, **kwargs: Any) -> Observation:
        solved_before = self._state.solved
        observation = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        if isinstance(action, CallToolAction) and isinstance(observation, CallToolObservation):
            s = self._state
            s.step_count += 1
            observation.reward = 1.0 if s.solved and not solved_before else 0.0
            observation.done = s.solved or s.guesses_left <= 0
        return observation

    def _step_impl(self, action: Action, timeout_s: Optional[float] = None, **kwargs: Any) -> Observation:
        # Not a tool call: this environment takes tool calls only.
        return Observation(done=False, reward=0.0, metadata={"error": "call a tool: guess(number) or guesses_left()"})

    @property
    def state(self) -> GameState:
        return self._state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--sessions", type=int, default=256, help="concurrent WebSocket sessions allowed")
    args = parser.parse_args()
    app = create_app(GuessToolsEnvironment, CallToolAction, CallToolObservation, env_name="guess_number_tools",
                     max_concurrent_envs=args.sessions)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", ws_max_size=16 << 20)


if __name__ == "__main__":
    main()
