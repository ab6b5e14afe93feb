"""The ``/ws`` endpoint: one session, one environment instance, per connection.

This is the hot path. It is a raw ASGI endpoint (no per-message wrapper objects): each
frame is parsed once, validated once, and its reply serialized once.
"""

from __future__ import annotations

import logging
from time import monotonic
from typing import Any

from pydantic import ValidationError

from ..models import Action, State
from ..protocol import (
    CLOSE_INTERNAL_ERROR,
    CLOSE_NORMAL,
    CLOSE_TRY_AGAIN_LATER,
    ErrorCode,
    decode,
    error_message,
    observation_message,
    state_message,
)
from .adapter import ContractViolation, StepTimeout
from .auth import selected_subprotocol
from .limits import EXTRA_FIELDS_ALLOWED, client_identity, too_many_fields
from .limits import validation_errors as bounded_validation_errors
from .sessions import Session, SessionManager

logger = logging.getLogger("openenv_runtime.server")

_CLOSE = object()  # sentinel reply: end the session


class _Final(str):
    """A reply after which the session ends (close 1011): the step overran its timeout."""


def describe_exception(exc: BaseException) -> str:
    """A one-line description for the client; the traceback stays in the server log."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def invalid_action(exc: ValidationError) -> dict[str, Any]:
    """The ``errors`` (the first few) and ``error_count`` of an invalid action's reply."""
    errors, total = bounded_validation_errors(exc)
    return {"errors": errors, "error_count": total}


class WebSocketEndpoint:
    """ASGI app for ``/ws``."""

    def __init__(
        self,
        manager: SessionManager,
        action_cls: type[Action],
        max_message_bytes: int,
        auth_required: bool = False,
    ) -> None:
        self.manager = manager
        self.runner = manager.runner
        self.action_cls = action_cls
        self.validate_action = action_cls.__pydantic_validator__.validate_python
        self.max_message_bytes = max_message_bytes
        self.max_action_fields = len(action_cls.model_fields) + EXTRA_FIELDS_ALLOWED
        self.auth_required = auth_required

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        client = client_identity(scope, self.auth_required)
        session = self.manager.open("ws", client)
        await send({"type": "websocket.accept", "subprotocol": selected_subprotocol(scope)})
        if session is None and self.manager.client_full(client):
            await send(
                {
                    "type": "websocket.send",
                    "text": error_message(
                        ErrorCode.CAPACITY_REACHED,
                        f"This client already holds {self.manager.per_client} sessions, the most "
                        "one client may hold (MAX_SESSIONS_PER_CLIENT); close one first.",
                        max_sessions_per_client=self.manager.per_client,
                    ),
                }
            )
            await send(
                {
                    "type": "websocket.close",
                    "code": CLOSE_TRY_AGAIN_LATER,
                    "reason": "per-client cap",
                }
            )
            return
        if session is None:
            await send(
                {
                    "type": "websocket.send",
                    "text": error_message(
                        ErrorCode.CAPACITY_REACHED,
                        f"Server is at capacity ({self.manager.capacity} sessions); retry later or raise "
                        "MAX_CONCURRENT_ENVS.",
                        active_sessions=self.manager.active,
                        max_sessions=self.manager.capacity,
                    ),
                }
            )
            await send(
                {
                    "type": "websocket.close",
                    "code": CLOSE_TRY_AGAIN_LATER,
                    "reason": "capacity reached",
                }
            )
            return

        session.send = send  # lets the reaper and shutdown close this connection
        try:
            try:
                session.env = await self.runner.create()
                session.step = self.runner.bind_step(session.env)
            except Exception as exc:
                logger.exception("creating the environment failed")
                await send(
                    {
                        "type": "websocket.send",
                        "text": error_message(ErrorCode.FACTORY_ERROR, describe_exception(exc)),
                    }
                )
                await send(
                    {
                        "type": "websocket.close",
                        "code": CLOSE_INTERNAL_ERROR,
                        "reason": "environment factory failed",
                    }
                )
                return
            # The message loop lives in this frame (not a helper coroutine): one frame less per
            # open session, which is what thousands of idle sessions are made of.
            handle = self._handle
            while True:
                message = await receive()
                if message["type"] != "websocket.receive" or session.released:
                    return  # disconnect, or the reaper/shutdown closed it
                frame = message.get("text")
                if frame is None:
                    frame = message.get("bytes") or b""
                session.busy = True
                try:
                    reply = await handle(session, frame)
                finally:
                    session.busy = False
                    session.last_active = monotonic()
                if reply is _CLOSE:
                    await send({"type": "websocket.close", "code": CLOSE_NORMAL})
                    return
                await send({"type": "websocket.send", "text": reply})
                if type(reply) is _Final:
                    session.env = None  # abandoned: the runner closes it when its call returns
                    await send(
                        {
                            "type": "websocket.close",
                            "code": CLOSE_INTERNAL_ERROR,
                            "reason": "step timeout",
                        }
                    )
                    return
        except OSError:
            pass  # the client went away while we were sending
        finally:
            await self.manager.release(session)

    async def _handle(self, session: Session, frame: str | bytes) -> Any:
        if len(frame) > self.max_message_bytes:
            return error_message(
                ErrorCode.VALIDATION_ERROR,
                f"Frame of {len(frame)} bytes exceeds the limit of {self.max_message_bytes}; "
                "send smaller messages or raise OPENENV_MAX_MESSAGE_BYTES on the server.",
            )
        try:
            msg = decode(frame)
        except ValueError as exc:
            return error_message(ErrorCode.INVALID_JSON, f"Frame is not valid JSON: {exc}")
        if not isinstance(msg, dict):
            return error_message(
                ErrorCode.VALIDATION_ERROR,
                f'Each frame must be a JSON object such as {{"type": "step", "data": {{...}}}}, got {type(msg).__name__}.',
            )
        kind = msg.get("type")
        try:
            if kind == "step":
                data = msg.get("data")
                too_many = too_many_fields(data, self.max_action_fields)
                if too_many is not None:
                    return error_message(ErrorCode.VALIDATION_ERROR, too_many)
                try:
                    action = self.validate_action(data)
                except ValidationError as exc:
                    return error_message(
                        ErrorCode.VALIDATION_ERROR, "Invalid action", **invalid_action(exc)
                    )
                return observation_message(await session.step(action))
            if kind == "reset":
                options = msg.get("data")
                if options is None:
                    options = {}
                elif not isinstance(options, dict):
                    return error_message(
                        ErrorCode.VALIDATION_ERROR,
                        'reset data must be an object, e.g. {"seed": 1}.',
                    )
                return observation_message(await self.runner.reset(session.env, options))
            if kind == "state":
                state: State = await self.runner.state(session.env)
                return state_message(state)
            if kind == "close":
                return _CLOSE
        except StepTimeout as exc:
            logger.error("session %s ended: %s", session.id, exc)
            self.manager.abandoned += 1
            return _Final(error_message(ErrorCode.STEP_TIMEOUT, str(exc)))
        except ContractViolation as exc:
            logger.error("%s", exc)
            return error_message(ErrorCode.EXECUTION_ERROR, str(exc))
        except ValidationError as exc:
            # e.g. the environment built an invalid Observation
            logger.exception("environment raised a validation error")
            return error_message(ErrorCode.EXECUTION_ERROR, describe_exception(exc))
        except Exception as exc:
            logger.exception("environment raised during %s", kind)
            return error_message(ErrorCode.EXECUTION_ERROR, describe_exception(exc))
        return error_message(
            ErrorCode.UNKNOWN_TYPE,
            f"Unknown message type {kind!r}; expected one of reset, step, state, close.",
        )
