"""``GenericEnvClient``: talk to any OpenEnv server with plain dicts, no model classes needed."""

from __future__ import annotations

from typing import Any

from ..models import StepResult
from ..protocol import encode
from .env_client import EnvClient


class GenericAction(dict[str, Any]):
    """An action as a plain dict of fields, for :class:`GenericEnvClient`: ``GenericAction(message="hi")``."""

    def __init__(self, **fields: Any) -> None:
        super().__init__(fields)

    def __repr__(self) -> str:
        return f"GenericAction({', '.join(f'{k}={v!r}' for k, v in self.items())})"


class DictObservation(dict[str, Any]):
    """An observation as the server sent it: a dict of its body, plus ``reward`` and ``done``.

    A plain ``dict`` (as the reference's generic client returns) that also carries the
    envelope's reward and done flag as attributes.
    """

    def __init__(
        self, data: dict[str, Any], reward: float | int | bool | None = None, done: bool = False
    ) -> None:
        super().__init__(data)
        self.reward = reward
        self.done = done

    @property
    def data(self) -> dict[str, Any]:
        return dict(self)


class GenericEnvClient(EnvClient):  # type: ignore[type-arg]
    """Like :class:`EnvClient`, but actions are dicts and observations/state come back as dicts::

    async with GenericEnvClient("http://127.0.0.1:8000") as env:
        result = await env.step({"message": "hi"})
        result.observation["echoed_message"]
    """

    def _step_payload(self, action: Any) -> dict[str, Any]:
        """The action's fields as a dict (the reference's hook name)."""
        if isinstance(action, dict):
            return dict(action)
        return dict(action.model_dump())

    def _action_json(self, action: Any) -> str:
        if not isinstance(action, dict):
            return super()._action_json(action)
        return encode(action)

    def _parse_result(self, data: dict[str, Any]) -> StepResult[Any]:
        reward, done = data.get("reward"), bool(data.get("done", False))
        return StepResult(
            observation=DictObservation(data.get("observation", {}), reward, done),
            reward=reward,
            done=done,
            metadata=data.get("metadata"),
        )

    def _parse_state(self, data: dict[str, Any]) -> Any:
        return data
