"""The built-in benchmark environment that ``openenv bench --serve`` measures.

Its action has one field, ``wait`` (seconds); ``step`` sleeps that long to stand for the
work a real environment does, then answers a small fixed observation. Two variants:

* ``app`` — ``BenchEnvironment``: ``async`` methods, the step awaits ``asyncio.sleep``;
* ``sync_app`` — ``SyncBenchEnvironment``: plain methods, the step calls ``time.sleep``
  (so it runs on the server's shared thread pool).

This module depends on ``openenv_runtime`` only, so any server can load it::

    python -m openenv_runtime.serve openenv_cli.bench.bench_env:app --port 8000

Both apps are built on first access. They hold up to ``MAX_CONCURRENT_ENVS`` sessions per
worker (default here 65536: the benchmark is about how many a machine holds) and serve no
web interface unless ``ENABLE_WEB_INTERFACE`` says so.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from uuid import uuid4

from openenv_runtime import Action, Environment, Observation, State, create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.wire import EnvironmentMetadata

DEFAULT_CAPACITY = 65536


class BenchAction(Action):
    """Sleep ``wait`` seconds in ``step``."""

    wait: float = 0.0


class BenchObservation(Observation):
    ok: bool = True


class BenchEnvironment(Environment[BenchAction, BenchObservation, State]):
    """Async benchmark environment: ``step`` awaits ``asyncio.sleep(wait)``."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()

    async def reset(  # type: ignore[override]  # the runtime awaits async methods
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> BenchObservation:
        self._state = State(episode_id=episode_id or uuid4().hex)
        return BenchObservation(reward=0.0)

    async def step(self, action: BenchAction, **kwargs: Any) -> BenchObservation:  # type: ignore[override]
        if action.wait > 0:
            await asyncio.sleep(action.wait)
        self._state.step_count += 1
        return BenchObservation(reward=1.0)

    @property
    def state(self) -> State:
        return self._state


class SyncBenchEnvironment(Environment[BenchAction, BenchObservation, State]):
    """Sync benchmark environment: ``step`` calls ``time.sleep(wait)`` on the server's thread pool."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> BenchObservation:
        self._state = State(episode_id=episode_id or uuid4().hex)
        return BenchObservation(reward=0.0)

    def step(self, action: BenchAction, **kwargs: Any) -> BenchObservation:
        if action.wait > 0:
            time.sleep(action.wait)
        self._state.step_count += 1
        return BenchObservation(reward=1.0)

    @property
    def state(self) -> State:
        return self._state


def build_app(sync: bool = False) -> Any:
    """A fresh server for the async (default) or the sync benchmark environment."""
    env = SyncBenchEnvironment if sync else BenchEnvironment
    return create_app(
        env,
        BenchAction,
        BenchObservation,
        State,
        metadata=EnvironmentMetadata(
            name="openenv-bench-sync" if sync else "openenv-bench",
            description="The openenv benchmark environment: step sleeps `wait` seconds.",
            readme_content="The openenv benchmark environment: `step` sleeps `wait` seconds, "
            "then answers `ok`.",
        ),
        settings=ServerSettings(web_interface=False, max_concurrent_envs=DEFAULT_CAPACITY),
    )


_apps: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    # Lazy, so importing the module (or serving one variant) does not build the other app.
    if name in ("app", "sync_app"):
        if name not in _apps:
            _apps[name] = build_app(sync=name == "sync_app")
        return _apps[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
