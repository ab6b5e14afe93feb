"""The environment ``abuse.py`` attacks: plain (sync) methods, a step that can hang or raise.

``message: "hang"`` blocks its thread for ``wait`` seconds (a step that never returns, as far
as the step timeout is concerned); ``message: "boom"`` raises; ``message: "stall-state"`` makes
this instance's next ``state`` block for 8 s. ``list_splits`` (the Task API) and tool actions
take 1 s, so concurrent calls overlap. ``POST /abuse/hang-create`` makes constructors block for
8 s until ``DELETE``; ``GET /abuse/instances`` reports live and peak instances. Served with
``python -m openenv_runtime.serve abuse_app:app --app-dir benchmarks``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from openenv_runtime import Action, Environment, Observation, State, create_app


class AbuseAction(Action):
    message: str
    wait: float = 0.0


class AbuseObservation(Observation):
    echoed: str = ""


HANG_CREATE = threading.Event()
_count = threading.Lock()
INSTANCES = {"live": 0, "peak": 0}


class AbuseEnvironment(Environment[AbuseAction, AbuseObservation, State]):
    """Echoes; hangs or raises on request."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        if HANG_CREATE.is_set():
            time.sleep(8)
        self._state = State()
        self._stall_state = False
        with _count:
            INSTANCES["live"] += 1
            INSTANCES["peak"] = max(INSTANCES["peak"], INSTANCES["live"])

    def close(self) -> None:
        with _count:
            INSTANCES["live"] -= 1

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kw: object
    ) -> AbuseObservation:
        self._state = State(episode_id=episode_id)
        return AbuseObservation(echoed="ready", reward=0.0)

    def step(self, action: Any, **kw: object) -> AbuseObservation:
        if not isinstance(action, AbuseAction):  # an MCP tool action: slow, then no tools
            time.sleep(1)
            raise TypeError("no tools here")
        if action.message == "hang":
            time.sleep(action.wait)
        if action.message == "boom":
            raise RuntimeError("the environment exploded")
        if action.message == "stall-state":
            self._stall_state = True
        self._state.step_count += 1
        return AbuseObservation(echoed=action.message, reward=1.0)

    def list_splits(self) -> list[str]:
        time.sleep(1)
        return ["train"]

    @property
    def state(self) -> State:
        if self._stall_state:
            time.sleep(8)
        return self._state


app = create_app(AbuseEnvironment, AbuseAction, AbuseObservation, env_name="abuse")


@app.get("/abuse/instances")
def instances() -> dict[str, int]:
    return dict(INSTANCES)


@app.post("/abuse/hang-create")
def hang_create() -> dict[str, bool]:
    HANG_CREATE.set()
    return {"hang": True}


@app.delete("/abuse/hang-create")
def stop_hanging() -> dict[str, bool]:
    HANG_CREATE.clear()
    return {"hang": False}


@app.post("/abuse/reset-peak")
def reset_peak() -> dict[str, int]:
    INSTANCES["peak"] = INSTANCES["live"]
    return dict(INSTANCES)
