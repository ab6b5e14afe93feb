"""Action/observation conversion helpers with the reference's names and results."""

from __future__ import annotations

from typing import Any, TypeVar

from ...models import Action, Observation

ActT = TypeVar("ActT", bound=Action)


def deserialize_action(action_data: dict[str, Any], action_cls: type[ActT]) -> ActT:
    """Validate ``action_data`` into ``action_cls``; ``list_tools`` / ``call_tool`` are always known."""
    from openenv_runtime.server.running.actions import action_validator

    return action_validator(action_cls)(action_data)  # type: ignore[no-any-return]


def deserialize_action_with_preprocessing(
    action_data: dict[str, Any], action_cls: type[ActT]
) -> ActT:
    """Like :func:`deserialize_action`, first turning lists into tuples where the field is a tuple."""
    data = dict(action_data)
    if data.get("type") == "call_tool" and isinstance(data.get("arguments"), str):
        import json

        try:
            data["arguments"] = json.loads(data["arguments"])
        except ValueError:
            pass
    for name, field in action_cls.model_fields.items():
        value = data.get(name)
        if isinstance(value, list) and getattr(field.annotation, "__origin__", None) is tuple:
            data[name] = tuple(value)
    return deserialize_action(data, action_cls)


def serialize_observation(observation: Observation) -> dict[str, Any]:
    """``{"observation": body, "reward": r, "done": d}`` plus ``"metadata"`` when it is not empty."""
    result: dict[str, Any] = {
        "observation": observation.model_dump(exclude={"reward", "done"}),
        "reward": observation.reward,
        "done": observation.done,
    }
    if observation.metadata:
        result["metadata"] = observation.metadata
    return result
