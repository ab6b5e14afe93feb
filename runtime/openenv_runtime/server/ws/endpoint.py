"""The ``/ws`` endpoint: one session, one environment instance, per connection.

This is the hot path. It is a raw ASGI endpoint (no per-message wrapper objects): each
frame is parsed once, validated once, and its reply serialized once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from time import monotonic, perf_counter
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError
from pydantic_core import from_json

from openenv_runtime.models import Action, Observation, State
from openenv_runtime.observability.tracing import (
    TRACEPARENT,
    SessionSpan,
    context_from_asgi,
    failed,
)
from openenv_runtime.protocol import (
    CLOSE_INTERNAL_ERROR,
    CLOSE_NORMAL,
    CLOSE_SERVICE_RESTART,
    ErrorCode,
    decode,
    encode,
    error_message,
    observation_message,
    state_message,
)
from openenv_runtime.server.guards.limits import (
    EXTRA_FIELDS_ALLOWED,
    invalid_action_text,
    too_many_fields,
)
from openenv_runtime.server.guards.limits import validation_errors as bounded_validation_errors
from openenv_runtime.server.metrics import WS_DONE, WS_ERROR, WS_INVALID, WS_OK, WS_TIMEOUT, Tally
from openenv_runtime.server.running.adapter import ContractViolation, PlainStep, StepTimeout
from openenv_runtime.server.sessions import resume
from openenv_runtime.server.sessions.registry import Session, SessionManager
from openenv_runtime.server.ws import vector
from openenv_runtime.server.ws.handshake import (
    HEADER_BALANCER,
    RETRY_AFTER_SECONDS,
    SessionOpening,
    describe_exception,
)
from openenv_runtime.server.ws.inline_frames import EXTENSION as INLINE_FRAMES
from openenv_runtime.server.ws.inline_frames import FrameHandler

if TYPE_CHECKING:
    from openenv_runtime.server.sessions.checkpoint_ops import Checkpointer
    from openenv_runtime.server.sessions.checkpoints import Blob

logger = logging.getLogger("openenv_runtime.server")

__all__ = [
    "HEADER_BALANCER",
    "RETRY_AFTER_SECONDS",
    "WebSocketEndpoint",
    "describe_exception",
    "invalid_action",
]

_CLOSE = object()  # sentinel reply: end the session
_MOVE = object()  # sentinel reply: draining, a reset arrived: end the session without applying it


class _Final(str):
    """A reply after which the session ends (close 1011): the step overran its timeout."""


def invalid_action(exc: ValidationError) -> dict[str, Any]:
    """An invalid action's reply: a ``message`` naming the first wrong field, the ``errors``
    (the first few) and ``error_count``."""
    errors, total = bounded_validation_errors(exc)
    return {"message": invalid_action_text(errors, total), "errors": errors, "error_count": total}


def record_reply(span: Any, reply: str) -> None:
    """A reset's or step's outcome on its span: reward and done, or the error's code."""
    try:
        message = from_json(reply)
        data = message["data"]
    except (ValueError, KeyError, TypeError):
        return
    if message.get("type") == "error":
        failed(span, str(data.get("code")))
        return
    done = bool(data.get("done"))
    span.set_attribute("openenv.outcome", "done" if done else "ok")
    span.set_attribute("openenv.done", done)
    reward = data.get("reward")
    if type(reward) is float or type(reward) is int:
        span.set_attribute("openenv.reward", float(reward))


class McpHandle(Protocol):
    """Answers one ``{"type": "mcp"}`` frame's JSON-RPC request (``MCPHandler.handle``)."""

    def __call__(
        self, payload: Any, current: Session | None = None, client: str | None = None
    ) -> Awaitable[dict[str, Any]]: ...


Attach = Callable[["WebSocketEndpoint", dict[str, Any], Any, Any], Awaitable[None]]
"""Serves ``/ws?session_id=``: a WebSocket on a session opened over HTTP (``serve_attached``)."""


class WebSocketEndpoint(SessionOpening):
    """ASGI app for ``/ws``."""

    def __init__(
        self,
        manager: SessionManager,
        action_cls: type[Action],
        max_message_bytes: int,
        auth_required: bool = False,
        capacity_refusal: str = "auto",
        inline_frames: bool = True,
        tracer: Any = None,
        *,
        validate_action: Callable[[Any], Action] | None = None,
        tally: Tally | None = None,
        checkpoints: Checkpointer | None = None,
        mcp: McpHandle | None = None,
        attach: Attach | None = None,
    ) -> None:
        self.manager = manager
        self.runner = manager.runner
        self.action_cls = action_cls
        self.validate_action = validate_action or action_cls.__pydantic_validator__.validate_python
        self.max_message_bytes = max_message_bytes
        self.max_action_fields = len(action_cls.model_fields) + EXTRA_FIELDS_ALLOWED
        self.auth_required = auth_required
        self.capacity_refusal = capacity_refusal  # auto | http | message (see settings.py)
        self.inline_frames = inline_frames  # cheap plain steps answered below ASGI
        # Reference features (server/mcp.py): {"type": "mcp"} frames and /ws?session_id=
        # attaching to a session opened over HTTP.
        self.mcp = mcp
        self.attach = attach
        # Checkpoint and restore (server/sessions/checkpoint_ops.py).
        self.checkpoints = checkpoints
        # Vector sessions (server/ws/vector.py): set by create_app unless OPENENV_MAX_VECTOR_ENVS=0.
        self.vectors: vector.VectorSessions | None = None
        # What each step adds to /metrics; None with metrics off (server/metrics.py).
        self.tally = tally
        # OpenTelemetry (observability/tracing.py): None with tracing off. On, every reset and
        # step goes through _dispatch, which the traced one replaces (no inline steps).
        self.tracer = tracer
        if tracer is not None:
            self.inline_frames = False
            self._dispatch = self._traced_dispatch  # type: ignore[method-assign]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        if self.attach is not None and b"session_id=" in scope.get("query_string", b""):
            await self.attach(self, scope, receive, send)
            return
        if self.vectors is not None:
            vector_size = vector.requested(scope)
            if vector_size is not None:
                await self.vectors.serve(scope, receive, send, vector_size)
                return
        manager = self.manager
        key, token = resume.handshake(scope) if manager.lifecycle.resume_grace > 0 else (None, None)
        if key is not None and token is not None:
            session = await self._reattach(scope, send, key.decode(), token)
            if session is None:
                return
        else:
            start: Blob | None = None
            checkpoints = self.checkpoints
            if checkpoints is not None:  # X-OpenEnv-Restore: checked before any session
                asked = await checkpoints.from_handshake(scope, send)
                if asked is False:
                    return
                start = asked
            session = await self._open(scope, send, key)
            if session is None:
                return
            if (
                start is not None
                and checkpoints is not None
                and not await checkpoints.start_from(session, start, send)
            ):
                return
        state = session.resume
        generation = state.generation if state is not None else 0
        session.send = send  # lets the reaper, a drain and shutdown close this connection
        ended_by_client = False
        traced = None
        if self.tracer is not None:
            traced = SessionSpan.open(
                self.tracer, session.label, "ws", context_from_asgi(scope.get("headers", ()))
            )
        # The protocol under ASGI answers cheap plain steps itself when it can (inline_frames.py).
        protocol = None
        if self.inline_frames and type(session.step) is PlainStep:
            protocol = (scope.get("extensions") or {}).get(INLINE_FRAMES)
            if protocol is not None:
                protocol.frame_handler = self._inline_handler(session, state, generation)
        try:
            # The message loop lives in this frame (not a helper coroutine): one frame less per
            # open session, which is what thousands of idle sessions are made of.
            parse, dispatch, step_inline = self.parse, self._dispatch, self._step_inline
            max_bytes = self.max_message_bytes
            while True:
                message = await receive()
                if message["type"] != "websocket.receive" or session.released:
                    return  # disconnect, or the reaper/drain/shutdown closed it
                if state is not None and state.generation != generation:
                    return  # a resuming connection took the session over
                frame = message.get("text")
                if frame is None:
                    frame = message.get("bytes") or b""
                try:  # parse, unrolled for a valid frame; an invalid one gets its error there
                    msg = from_json(frame) if len(frame) <= max_bytes else None
                except ValueError:
                    msg = None
                if type(msg) is not dict:
                    msg = parse(frame)
                step = session.step
                if (
                    type(step) is PlainStep
                    and traced is None
                    and step.placement.inline
                    and state is None
                    and type(msg) is dict
                    and msg.get("type") == "step"
                ):
                    # A cheap plain step: no coroutine, no await, so nothing else runs meanwhile
                    # (the reaper cannot see it busy) and the reply is ready when it returns.
                    reply: Any = step_inline(session, step, msg.get("data"))
                    session.last_active = monotonic()
                else:
                    session.busy = True
                    try:
                        # _handle, unrolled here: one coroutine less per frame
                        if type(msg) is not dict:
                            reply = msg  # the frame's error
                        elif state is None:
                            reply = await dispatch(session, msg)
                        else:
                            seq = msg.get("seq")
                            if seq is None or msg.get("type") == "close":
                                reply = await dispatch(session, msg)
                            else:
                                reply = await self._sequenced(session, state, msg, seq)
                    finally:
                        session.busy = False
                        session.last_active = monotonic()
                if state is not None and state.generation != generation:
                    return  # taken over while the step ran: its reply is kept for the new one
                if reply is _CLOSE:
                    ended_by_client = True
                    await send({"type": "websocket.close", "code": CLOSE_NORMAL})
                    return
                if reply is _MOVE:
                    # a new episode while draining: unanswered, so the client starts it elsewhere
                    await manager.end(session, CLOSE_SERVICE_RESTART, "server draining", "drain")
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
            if protocol is not None:
                protocol.frame_handler = None
            if traced is not None:
                traced.end(session.ended_by)
            if state is None or state.generation == generation:
                if not ended_by_client and manager.can_detach(session):
                    manager.detach(session)
                else:
                    await manager.release(session)

    def parse(self, frame: str | bytes) -> Any:
        """The frame's JSON object, or the error reply (a ``str``) that says what is wrong."""
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
        if type(msg) is not dict:
            return error_message(
                ErrorCode.VALIDATION_ERROR,
                f'Each frame must be a JSON object such as {{"type": "step", "data": {{...}}}}, got {type(msg).__name__}.',
            )
        return msg

    async def _handle(self, session: Session, frame: str | bytes) -> Any:
        """One frame's reply (the loop in ``__call__`` does the same, unrolled)."""
        msg = self.parse(frame)
        if type(msg) is not dict:
            return msg
        state = session.resume
        if state is None:
            return await self._dispatch(session, msg)
        seq = msg.get("seq")
        if seq is None or msg.get("type") == "close":
            return await self._dispatch(session, msg)
        return await self._sequenced(session, state, msg, seq)

    async def _sequenced(
        self, session: Session, state: resume.ResumeState, msg: dict[str, Any], seq: Any
    ) -> Any:
        """Apply a numbered request once: a repeat gets the kept reply, never a second step."""
        if type(seq) is not int or seq < 1:
            return error_message(
                ErrorCode.VALIDATION_ERROR, f"seq must be a positive integer, got {seq!r}."
            )
        while state.inflight is not None and state.inflight_seq != seq:
            await asyncio.shield(state.inflight)  # one request at a time per instance
        if seq == state.last_seq and state.last_reply is not None:
            return state.last_reply
        if seq == state.inflight_seq and state.inflight is not None:
            return await asyncio.shield(state.inflight)  # still running: its reply, when ready
        if seq < state.last_seq:
            return error_message(
                ErrorCode.VALIDATION_ERROR,
                f"seq {seq} was answered before the last reply (seq {state.last_seq}); "
                "only the last request can be repeated.",
            )
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        state.inflight, state.inflight_seq = future, seq
        reply: Any = None
        try:
            reply = await self._dispatch(session, msg)
        finally:
            if reply is None:  # cancelled (shutdown): whoever waits gets an error, not a hang
                reply = error_message(ErrorCode.SESSION_ERROR, "the server stopped this request")
            state.last_seq, state.last_reply = seq, reply
            state.inflight = state.inflight_seq = None
            future.set_result(reply)
        return reply

    def _inline_handler(
        self, session: Session, state: resume.ResumeState | None, generation: int
    ) -> FrameHandler:
        """The reply to a frame the protocol can send at once: a ``step`` whose plain ``step()``
        runs inline, numbered or not; ``None`` for any other frame (it then takes the loop in
        ``__call__``, which answers it as before, errors included)."""
        max_bytes = self.max_message_bytes
        step_inline = self._step_inline
        tally = self.tally

        def answer(frame: str) -> str | None:
            step = session.step
            if type(step) is not PlainStep or not step.placement.inline or session.released:
                return None
            if len(frame) > max_bytes:
                return None
            try:
                msg = from_json(frame)
            except ValueError:
                return None
            if type(msg) is not dict or msg.get("type") != "step":
                return None
            seq = None
            if state is not None:
                if state.generation != generation or state.inflight is not None:
                    return None
                seq = msg.get("seq")
                # a new request only: repeats and bad numbers get their answer in _sequenced
                if seq is not None and (type(seq) is not int or seq <= state.last_seq):
                    return None
            reply = step_inline(session, step, msg.get("data"))
            session.last_active = monotonic()
            if tally is not None:
                tally.inline_steps += 1
            if seq is not None and state is not None:
                state.last_seq, state.last_reply = seq, reply
            return reply

        return answer

    def _step_inline(self, session: Session, step: PlainStep, data: Any) -> str:
        """The reply to a step whose plain ``step()`` runs inline (``_dispatch``'s step, unrolled)."""
        start = perf_counter()
        tally = self.tally
        if type(data) is dict and len(data) > self.max_action_fields:
            if tally is not None:
                tally.steps[WS_INVALID] += 1
            return error_message(
                ErrorCode.VALIDATION_ERROR, str(too_many_fields(data, self.max_action_fields))
            )
        try:
            action = self.validate_action(data)
        except ValidationError as exc:
            if tally is not None:
                tally.steps[WS_INVALID] += 1
            return error_message(ErrorCode.VALIDATION_ERROR, **invalid_action(exc))
        try:
            obs = step.placement.call_inline(step.func, action)
            if not isinstance(obs, Observation):
                obs = self.runner._check_observation(step.env, "step", obs)
            session.episode_open = not obs.done
            reply = observation_message(obs)
            if tally is not None:
                tally.step(WS_DONE if obs.done else WS_OK, perf_counter() - start)
            return reply
        except Exception as exc:
            if tally is not None:
                tally.step(WS_ERROR, perf_counter() - start)
            return self.failure(session, "step", exc)

    def action(self, data: Any) -> Any:
        """The validated action, or the error reply (a ``str``) that says what is wrong."""
        if type(data) is dict and len(data) > self.max_action_fields:
            return error_message(
                ErrorCode.VALIDATION_ERROR, str(too_many_fields(data, self.max_action_fields))
            )
        try:
            return self.validate_action(data)
        except ValidationError as exc:
            return error_message(ErrorCode.VALIDATION_ERROR, **invalid_action(exc))

    def failure(self, session: Session, kind: Any, exc: Exception) -> str:
        """The reply when handling a ``kind`` message raised ``exc`` (logged here)."""
        if isinstance(exc, StepTimeout):
            logger.error("session %s ended: %s", session.label, exc)
            self.manager.abandoned += 1
            session.ended_by = "step_timeout"
            return _Final(error_message(ErrorCode.STEP_TIMEOUT, str(exc)))
        if isinstance(exc, ContractViolation):
            logger.error("%s", exc)
            return error_message(ErrorCode.EXECUTION_ERROR, str(exc))
        if isinstance(exc, ValidationError):  # e.g. the environment built an invalid Observation
            logger.exception("environment raised a validation error")
            return error_message(ErrorCode.EXECUTION_ERROR, describe_exception(exc))
        logger.exception("environment raised during %s", kind)
        return error_message(ErrorCode.EXECUTION_ERROR, describe_exception(exc))

    async def _traced_dispatch(self, session: Session, msg: dict[str, Any]) -> Any:
        """``_dispatch`` inside a span for each reset and step (tracing on; see __init__)."""
        kind = msg.get("type")
        traced = SessionSpan.current()
        if (kind != "step" and kind != "reset") or traced is None:
            return await WebSocketEndpoint._dispatch(self, session, msg)
        with traced.request(self.tracer, kind, msg.get(TRACEPARENT)) as span:
            start = perf_counter()
            reply = await WebSocketEndpoint._dispatch(self, session, msg)
            span.set_attribute("openenv.duration_ms", (perf_counter() - start) * 1000)
            if type(reply) is str or type(reply) is _Final:
                record_reply(span, reply)
            elif reply is _MOVE:
                span.set_attribute("openenv.outcome", "moved")
        return reply

    async def _dispatch(self, session: Session, msg: dict[str, Any]) -> Any:
        kind = msg.get("type")
        try:
            if kind == "step":
                action = self.action(msg.get("data"))
                tally = self.tally
                if type(action) is str:
                    if tally is not None:
                        tally.steps[WS_INVALID] += 1
                    return action  # the action's validation error
                start = perf_counter()
                try:
                    obs = await session.step(action)
                except Exception as exc:
                    if tally is not None:
                        failed = WS_TIMEOUT if isinstance(exc, StepTimeout) else WS_ERROR
                        tally.step(failed, perf_counter() - start)
                    raise
                session.episode_open = not obs.done
                reply = observation_message(obs)
                if tally is not None:
                    tally.step(WS_DONE if obs.done else WS_OK, perf_counter() - start)
                return reply
            if kind == "reset":
                if self.manager.draining:
                    return _MOVE
                options = msg.get("data")
                if options is None:
                    options = {}
                elif not isinstance(options, dict):
                    return error_message(
                        ErrorCode.VALIDATION_ERROR,
                        'reset data must be an object, e.g. {"seed": 1}.',
                    )
                start = perf_counter()
                try:
                    obs = await self.runner.reset(session.env, options)
                except Exception:
                    if self.tally is not None:
                        self.tally.reset("ws", False, perf_counter() - start)
                    raise
                if self.tally is not None:
                    self.tally.reset("ws", True, perf_counter() - start)
                session.episode_open = not obs.done
                return observation_message(obs)
            if kind == "state":
                state: State = await self.runner.state(session.env)
                return state_message(state)
            if kind == "close":
                return _CLOSE
            if (kind == "checkpoint" or kind == "restore") and self.checkpoints is not None:
                return await self.checkpoints.handle(session, kind, msg.get("data"))
            if kind == "mcp" and self.mcp is not None:
                answer = await self.mcp(msg.get("data"), current=session)
                return encode({"type": "mcp", "data": answer})
        except Exception as exc:
            return self.failure(session, kind, exc)
        return error_message(
            ErrorCode.UNKNOWN_TYPE,
            f"Unknown message type {kind!r}; expected one of reset, step, state, close, mcp, checkpoint, restore.",
        )
