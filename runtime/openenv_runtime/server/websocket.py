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
    encode,
    error_message,
    observation_message,
    state_message,
)
from .adapter import ContractViolation
from .sessions import Session, SessionManager

logger = logging.getLogger("openenv_runtime.server")

_CLOSE = object()  # sentinel reply: end the session


def describe_exception(exc: BaseException) -> str:
    """A one-line description for the client; the traceback stays in the server log."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def validation_errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False, include_context=False, include_input=False)
    ]


class WebSocketEndpoint:
    """ASGI app for ``/ws``."""

    def __init__(
        self, manager: SessionManager, action_cls: type[Action], max_message_bytes: int
    ) -> None:
        self.manager = manager
        self.runner = manager.runner
        self.action_cls = action_cls
        self.validate_action = action_cls.__pydantic_validator__.validate_python
        self.max_message_bytes = max_message_bytes
        # JSON-RPC handler for {"type": "mcp"} frames (set by create_app; see server/mcp.py).
        self.mcp: Any = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        attached = attached_session(self.manager, scope)
        session = self.manager.open("ws") if attached is None else attached
        await send({"type": "websocket.accept"})
        if isinstance(session, str):  # ?session_id= named no session we hold
            await send(
                {"type": "websocket.send", "text": error_message(ErrorCode.SESSION_ERROR, session)}
            )
            await send({"type": "websocket.close", "code": CLOSE_NORMAL})
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

        if attached is not None:
            await self._serve_attached(session, receive, send)
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
                try:
                    action = self.validate_action(msg.get("data"))
                except ValidationError as exc:
                    return error_message(
                        ErrorCode.VALIDATION_ERROR, "Invalid action", errors=validation_errors(exc)
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
            if kind == "mcp" and self.mcp is not None:
                reply = await self.mcp(msg.get("data"), current=session)
                return encode({"type": "mcp", "data": reply})
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
            f"Unknown message type {kind!r}; expected one of reset, step, state, close, mcp.",
        )

    async def _serve_attached(self, session: Session, receive: Any, send: Any) -> None:
        """A WebSocket on a session opened over HTTP (``/ws?session_id=``): it outlives the socket."""
        assert session.lock is not None
        if session.step is None:
            session.step = self.runner.bind_step(session.env)
        try:
            while True:
                message = await receive()
                if message["type"] != "websocket.receive" or session.released:
                    return
                frame = message.get("text") or message.get("bytes") or b""
                async with session.lock:  # HTTP calls on the same session wait their turn
                    session.busy = True
                    try:
                        reply = await self._handle(session, frame)
                    finally:
                        session.busy = False
                        session.last_active = monotonic()
                if reply is _CLOSE:
                    await send({"type": "websocket.close", "code": CLOSE_NORMAL})
                    return
                await send({"type": "websocket.send", "text": reply})
        except OSError:
            pass


def attached_session(manager: SessionManager, scope: dict[str, Any]) -> Session | str | None:
    """The HTTP session that ``?session_id=`` names, an error text, or None when none is named."""
    query = scope.get("query_string", b"").decode("latin-1")
    if "session_id=" not in query:
        return None
    from urllib.parse import parse_qs

    wanted = (parse_qs(query).get("session_id") or [""])[0]
    session = manager.sessions.get(wanted)
    if session is None or session.kind != "http" or session.env is None:
        return f"Unknown session_id: {wanted}; open one with POST /reset or openenv/session/create."
    return session
