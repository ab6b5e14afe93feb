"""The heavy-tailed simulator ``benchmarks/training/rollout_service.py`` plays.

- The environment: each episode's length (steps until ``done``) is drawn at reset from a
  lognormal with median 3 and sigma 1 (at least 1, at most ``MAX_TURNS``); steps are instant.
- The model (``latency_policy``, for ``python -m openenv_runtime.testing.stub_llm --policy``):
  each completion waits a lognormal time with median 50 ms and sigma 1.5, and at most
  ``MODEL_SLOTS`` completions are served at once (the rest queue), like a server with a fixed
  number of sequences in a batch.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
from typing import Any

from openenv_runtime import Action, Environment, Observation, State, create_app

MAX_TURNS = 32
MODEL_SLOTS = int(os.environ.get("ROLLOUT_SIM_MODEL_SLOTS", "64"))
SEED = int(os.environ.get("ROLLOUT_SIM_SEED", "0"))

_lengths = random.Random(SEED)
_latencies = random.Random(SEED + 1)
_slots: asyncio.Semaphore | None = None


def episode_length() -> int:
    return max(1, min(MAX_TURNS, round(_lengths.lognormvariate(math.log(3), 1.0))))


class TextAction(Action):
    text: str


class TextObservation(Observation):
    text: str = ""


class HeavyTailEnvironment(Environment[TextAction, TextObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()
        self._length = 1

    async def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> TextObservation:
        self._state = State(episode_id=episode_id)
        self._length = episode_length()
        return TextObservation(text=f"start {seed}")

    async def step(self, action: TextAction, **kwargs: Any) -> TextObservation:
        self._state.step_count += 1
        done = self._state.step_count >= self._length
        return TextObservation(text=f"turn {self._state.step_count}", reward=0.1, done=done)

    @property
    def state(self) -> State:
        return self._state


app = create_app(HeavyTailEnvironment, TextAction, TextObservation, State, max_concurrent_envs=4096)


async def latency_policy(messages: list[dict[str, Any]]) -> str:
    """A short reply after a lognormal wait for one of the model's ``MODEL_SLOTS`` slots."""
    global _slots
    if _slots is None:
        _slots = asyncio.Semaphore(MODEL_SLOTS)
    async with _slots:
        await asyncio.sleep(_latencies.lognormvariate(math.log(0.05), 1.5))
    return f"move {sum(m['role'] == 'assistant' for m in messages)}"
