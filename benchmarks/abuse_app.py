"""The environment ``abuse.py`` attacks: plain (sync) methods, a step that can hang or raise.

``message: "hang"`` blocks its thread for ``wait`` seconds (a step that never returns, as far
as the step timeout is concerned); ``message: "boom"`` raises. Served with
``python -m openenv_runtime.serve abuse_app:app --app-dir benchmarks``.
"""

from __future__ import annotations

import time

from openenv_runtime import Action, Environment, Observation, State, create_app


class AbuseAction(Action):
    message: str
    wait: float = 0.0


class AbuseObservation(Observation):
    echoed: str = ""


class AbuseEnvironment(Environment[AbuseAction, AbuseObservation, State]):
    """Echoes; hangs or raises on request."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kw: object
    ) -> AbuseObservation:
        self._state = State(episode_id=episode_id)
        return AbuseObservation(echoed="ready", reward=0.0)

    def step(self, action: AbuseAction, **kw: object) -> AbuseObservation:
        if action.message == "hang":
            time.sleep(action.wait)
        if action.message == "boom":
            raise RuntimeError("the environment exploded")
        self._state.step_count += 1
        return AbuseObservation(echoed=action.message, reward=1.0)

    @property
    def state(self) -> State:
        return self._state


app = create_app(AbuseEnvironment, AbuseAction, AbuseObservation, name="abuse")
