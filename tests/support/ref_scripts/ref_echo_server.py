"""Serve a test environment with openenv-core's own server (run with the reference venv).

    python ref_echo_server.py --port 8123 [--env echo|bench] [--max-concurrent-envs N]
                              [--workers N] [--metadata]

``echo``: action ``message: str``; observation ``echoed_message: str``,
``message_length: int``; reward ``0.1 * len(message)``; reset answers ``"ready"``
(length 0) with reward 0.0. ``--metadata`` makes each step observation carry
``metadata={"length": len(message)}`` (to see whether it reaches the client).

``bench``: action ``wait: float = 0.0``; an async step that sleeps ``wait`` seconds and
returns a small fixed observation. For benchmarks.

Configuration also travels in REF_SERVER_* environment variables, because with
``--workers > 1`` uvicorn imports the app in fresh processes via ``build_app``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from typing import Any, Optional

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

# --- echo ----------------------------------------------------------------------------


class EchoAction(Action):
    message: str


class EchoObservation(Observation):
    echoed_message: str = ""
    message_length: int = 0


def _with_metadata() -> bool:
    return os.environ.get("REF_SERVER_METADATA") == "1"


class EchoEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        self._metadata = _with_metadata()

    def reset(
        self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any
    ) -> EchoObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return EchoObservation(echoed_message="ready", message_length=0, reward=0.0, done=False)

    def step(self, action: EchoAction, timeout_s: Optional[float] = None, **kwargs: Any) -> EchoObservation:  # type: ignore[override]
        self._state.step_count += 1
        length = len(action.message)
        obs = EchoObservation(
            echoed_message=action.message,
            message_length=length,
            reward=0.1 * length,
            done=False,
        )
        if self._metadata:
            obs.metadata = {"length": length}
        return obs

    @property
    def state(self) -> State:
        return self._state


# --- bench ---------------------------------------------------------------------------


class BenchAction(Action):
    wait: float = 0.0


class BenchObservation(Observation):
    ok: bool = True


class BenchEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(
        self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any
    ) -> BenchObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return BenchObservation(reward=0.0)

    async def reset_async(
        self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any
    ) -> BenchObservation:
        return self.reset(seed=seed, episode_id=episode_id)

    def step(self, action: BenchAction, timeout_s: Optional[float] = None, **kwargs: Any) -> BenchObservation:  # type: ignore[override]
        raise NotImplementedError("the bench environment is async-only")

    async def step_async(  # type: ignore[override]
        self, action: BenchAction, timeout_s: Optional[float] = None, **kwargs: Any
    ) -> BenchObservation:
        if action.wait > 0:
            await asyncio.sleep(action.wait)
        self._state.step_count += 1
        return BenchObservation(reward=1.0)

    @property
    def state(self) -> State:
        return self._state


ENVIRONMENTS = {
    "echo": (EchoEnvironment, EchoAction, EchoObservation),
    "bench": (BenchEnvironment, BenchAction, BenchObservation),
}


def build_app():  # noqa: ANN201 - a FastAPI app; uvicorn calls this (factory=True)
    env_cls, action_cls, obs_cls = ENVIRONMENTS[os.environ.get("REF_SERVER_ENV", "echo")]
    max_envs = int(os.environ.get("REF_SERVER_MAX_CONCURRENT_ENVS", "1"))
    return create_app(env_cls, action_cls, obs_cls, env_name=f"ref_{env_cls.__name__}", max_concurrent_envs=max_envs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--env", choices=sorted(ENVIRONMENTS), default="echo")
    parser.add_argument("--max-concurrent-envs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--metadata", action="store_true")
    args = parser.parse_args()

    os.environ["REF_SERVER_ENV"] = args.env
    os.environ["REF_SERVER_MAX_CONCURRENT_ENVS"] = str(args.max_concurrent_envs)
    os.environ["REF_SERVER_METADATA"] = "1" if args.metadata else "0"

    import uvicorn

    if args.workers > 1:
        # Workers are fresh processes: they import this file as a module by name.
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        uvicorn.run(
            "ref_echo_server:build_app",
            factory=True,
            host=args.host,
            port=args.port,
            workers=args.workers,
            log_level="warning",
        )
    else:
        uvicorn.run(build_app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
