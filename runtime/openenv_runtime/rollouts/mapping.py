"""Default mapping between model text and environment actions/observations."""

from __future__ import annotations

import json
import re
from typing import Any

from ..llm.client import LLMResponse

_HIDDEN = ("reward", "done", "metadata")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


class ActionError(ValueError):
    """The model's reply is not an action of the environment; the text is fed back to it."""


def string_field(action_schema: dict[str, Any]) -> str | None:
    """The action's only string field, if it has exactly one (its value takes the reply text)."""
    properties = action_schema.get("properties") or {}
    strings = [name for name, spec in properties.items() if _is_string(spec)]
    required = set(action_schema.get("required") or [])
    if len(strings) == 1 and required <= set(strings):
        return str(strings[0])
    return None


def _is_string(spec: Any) -> bool:
    if not isinstance(spec, dict):
        return False
    if spec.get("type") == "string":
        return True
    options = spec.get("anyOf") or []
    return any(isinstance(o, dict) and o.get("type") == "string" for o in options)


def default_to_action(action_schema: dict[str, Any]) -> Any:
    """``to_action(reply)`` for an action schema: the text into the one string field, or the
    text parsed as the action's JSON (a ```json fence is allowed). Raises ``ActionError``."""
    field = string_field(action_schema)
    properties = set((action_schema.get("properties") or {}).keys())
    required = list(action_schema.get("required") or [])

    def to_action(reply: LLMResponse) -> dict[str, Any]:
        if reply.tool_calls:
            return dict(reply.tool_calls[0].args)
        text = reply.content.strip()
        if field is not None:
            return {field: text}
        fenced = _FENCE.search(text)
        try:
            value = json.loads(fenced.group(1) if fenced else text)
        except ValueError:
            raise ActionError(
                f"Your reply is not a JSON action. Reply with one JSON object with the fields "
                f"{sorted(properties)} (required: {required})."
            ) from None
        if not isinstance(value, dict):
            raise ActionError("The action must be a JSON object.")
        unknown = sorted(set(value) - properties) if properties else []
        missing = [r for r in required if r not in value]
        if unknown or missing:
            raise ActionError(
                f"Invalid action: unknown fields {unknown}, missing fields {missing}; "
                f"the fields are {sorted(properties)}."
            )
        return value

    return to_action


def default_to_message(observation: Any) -> str:
    """An observation as the next user message: its fields without reward, done and metadata
    (one field: its value; several: JSON)."""
    if hasattr(observation, "model_dump"):
        data = observation.model_dump()
    elif isinstance(observation, dict):
        data = dict(observation)
    else:
        return str(observation)
    shown = {k: v for k, v in data.items() if k not in _HIDDEN}
    if len(shown) == 1:
        (value,) = shown.values()
        return value if isinstance(value, str) else json.dumps(value)
    return json.dumps(shown, sort_keys=True, default=str)
