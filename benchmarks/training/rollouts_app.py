"""The environment ``benchmarks/training/rollouts.py`` plays: each step waits ``ROLLOUT_ENV_LATENCY``
seconds (default 0.05) on the event loop, then echoes the text back."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from openenv_runtime import Action, Environment, Observation, State, create_app

LATENCY = float(os.environ.get("ROLLOUT_ENV_LATENCY", "0.05"))


class SayAction(Action):
    text: str


class SayObservation(Observation):
    text: str = ""


class SlowEchoEnvironment(Environment[SayAction, SayObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()

    async def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> SayObservation:
        self._state = State(episode_id=episode_id)
        return SayObservation(text=f"start {seed}")

    async def step(self, action: SayAction, **kwargs: Any) -> SayObservation:
        await asyncio.sleep(LATENCY)
        self._state.step_count += 1
        return SayObservation(text=f"turn {self._state.step_count}", reward=0.1)

    @property
    def state(self) -> State:
        return self._state


app = create_app(SlowEchoEnvironment, SayAction, SayObservation, max_concurrent_envs=4096)


def say_policy(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The stand-in model's policy for these runs: every turn a ``say`` tool call, so that
    builders that stop at a reply without tool calls (the reference's) play every turn too."""
    turn = sum(m.get("role") == "assistant" for m in messages)
    return {"content": "", "tool_calls": [{"name": "say", "arguments": {"text": f"turn {turn}"}}]}
