"""The OpenEnv wire protocol: message types, error codes, and their encoding.

One JSON object per WebSocket text frame. The client sends ``reset``, ``step``, ``state``
and ``close``; the server answers ``observation``, ``state`` or ``error``. Encoding is
done once per message with pydantic-core's JSON (no intermediate ``json.dumps``).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel
from pydantic_core import from_json, to_json

from .errors import EnvError
from .models import ENVELOPE_FIELDS, Observation


class ErrorCode(str, Enum):
    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"
    UNAUTHORIZED = "UNAUTHORIZED"
    STEP_TIMEOUT = "STEP_TIMEOUT"


# Close codes (RFC 6455) the server uses.
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_POLICY_VIOLATION = 1008
CLOSE_INTERNAL_ERROR = 1011
CLOSE_SERVICE_RESTART = 1012
"""A draining server ends a session between episodes: start the next one on another replica."""
CLOSE_TRY_AGAIN_LATER = 1013

_EXCLUDE_ENVELOPE = set(ENVELOPE_FIELDS)


def decode(frame: str | bytes) -> Any:
    """Parse one frame (raises ``ValueError`` on invalid JSON)."""
    return from_json(frame)


def encode(message: dict[str, Any]) -> str:
    return to_json(message).decode()


def observation_message(obs: Observation) -> str:
    """``{"type": "observation", "data": {"observation": {...}, "reward": r, "done": d}}``.

    ``reward`` and ``done`` move to the envelope; everything else, ``metadata`` included,
    stays in the observation body. A non-empty ``metadata`` also travels beside
    ``observation`` (``data.metadata``), where reference clients fill ``StepResult.metadata``.
    """
    # The model's own serializer, called directly: model_dump_json adds ~2 µs of Python per call.
    body = obs.__pydantic_serializer__.to_json(obs, exclude=_EXCLUDE_ENVELOPE).decode()
    reward = obs.reward
    if type(reward) is float and (1e-4 <= abs(reward) < 1e16 or reward == 0.0):
        encoded = repr(reward)  # the same digits pydantic-core writes, without the call
    else:
        encoded = "null" if reward is None else to_json(reward).decode()
    done = "true" if obs.done else "false"
    if obs.metadata:
        meta = to_json(obs.metadata).decode()
        return (
            f'{{"type":"observation","data":{{"observation":{body},"reward":{encoded},'
            f'"done":{done},"metadata":{meta}}}}}'
        )
    return (
        f'{{"type":"observation","data":{{"observation":{body},"reward":{encoded},"done":{done}}}}}'
    )


def observation_payload(obs: Observation) -> dict[str, Any]:
    """The ``data`` of an observation message, as a dict (for the HTTP routes)."""
    payload: dict[str, Any] = {
        "observation": obs.model_dump(mode="json", exclude=_EXCLUDE_ENVELOPE),
        "reward": obs.reward,
        "done": obs.done,
    }
    if obs.metadata:
        payload["metadata"] = payload["observation"]["metadata"]
    return payload


def state_message(state: BaseModel) -> str:
    return f'{{"type":"state","data":{state.__pydantic_serializer__.to_json(state).decode()}}}'


def error_message(code: ErrorCode, message: str, **extra: Any) -> str:
    return encode({"type": "error", "data": {"message": message, "code": code.value, **extra}})


def http_step_body(obs: Observation, session_id: str) -> bytes:
    """The JSON body ``POST /step`` answers: the observation payload plus ``session_id``.

    The same fields in the same order as the route's response model writes them:
    ``observation``, ``reward``, ``done``, ``session_id``, then ``metadata`` when non-empty.
    """
    body = obs.__pydantic_serializer__.to_json(obs, exclude=_EXCLUDE_ENVELOPE)
    reward = obs.reward
    encoded = b"null" if reward is None else to_json(reward)
    done = b"true" if obs.done else b"false"
    tail = b"}" if not obs.metadata else b',"metadata":' + to_json(obs.metadata) + b"}"
    return (
        b'{"observation":'
        + body
        + b',"reward":'
        + encoded
        + b',"done":'
        + done
        + b',"session_id":'
        + to_json(session_id)
        + tail
    )


# -- the client's side: request frames and reply parsing ------------------------------------
CLOSE_FRAME = '{"type":"close"}'
STATE_FRAME = '{"type":"state"}'


def reset_frame(options: dict[str, Any]) -> str:
    """A ``reset`` request; options that are None are left out."""
    return (
        '{"type":"reset","data":'
        + encode({k: v for k, v in options.items() if v is not None})
        + "}"
    )


def step_frame(action_json: str) -> str:
    """A ``step`` request around an action already serialized to JSON."""
    return '{"type":"step","data":' + action_json + "}"


def numbered_step_frame(action_json: str, seq: int) -> str:
    """``step_frame(action_json)`` numbered ``seq`` for a resumable session (see client/resume.py)."""
    return f'{{"type":"step","data":{action_json},"seq":{seq}}}'


def reply_data(raw: str | bytes) -> dict[str, Any]:
    """The ``data`` of a reply frame; an ``error`` reply raises :class:`EnvError` with its code."""
    reply = from_json(raw)  # decode(), without the call
    data = reply.get("data") or {}
    if reply.get("type") == "error":
        message = data.get("message", "error")
        code = data.get("code", "SESSION_ERROR")
        raise EnvError(
            code, message, {k: v for k, v in data.items() if k not in ("message", "code")}
        )
    return data
