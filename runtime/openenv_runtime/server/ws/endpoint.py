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
from openenv_runtime.server.guards.limits import EXTRA_FIELDS_ALLOWED
from openenv_runtime.server.metrics import (
    VECTOR_DONE,
    VECTOR_ERROR,
    VECTOR_INVALID,
    VECTOR_OK,
    VECTOR_TIMEOUT,
    WS_DONE,
    WS_ERROR,
    WS_INVALID,
    WS_OK,
    WS_TIMEOUT,
    Tally,
)
from openenv_runtime.server.running.adapter import ContractViolation, StepTimeout
from openenv_runtime.server.running.step_placement import PlainStep
from openenv_runtime.server.sessions import resume
from openenv_runtime.server.sessions.registry import Session, SessionManager
from openenv_runtime.server.stepping import ActionRefused, Stepper
from openenv_runtime.server.ws import vector
from openenv_runtime.server.ws.handshake import (
    HEADER_BALANCER,
    RETRY_AFTER_SECONDS,
    SessionOpening,
    describe_exception,
)
from openenv_runtime.server.ws.inline_frames import FrameHandler, offer_frame_handler

if TYPE_CHECKING:
    from openenv_runtime.server.sessions.checkpoint_ops import Checkpointer
    from openenv_runtime.server.sessions.checkpoints import Blob

logger = logging.getLogger("openenv_runtime.server")

__all__ = [
    "CLOSE_REPLY",
    "HEADER_BALANCER",
    "RETRY_AFTER_SECONDS",
    "FinalReply",
    "WebSocketEndpoint",
    "describe_exception",
]

CLOSE_REPLY = object()  # sentinel reply: end the session
_MOVE = object()  # sentinel reply: draining, a reset arrived: end the session without applying it


class FinalReply(str):
    """A reply after which the session ends (close 1011): the step overran its timeout."""


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
        max_vector_envs: int = 0,
    ) -> None:
        self.manager = manager
        self.runner = manager.runner
        self.action_cls = action_cls
        validate = validate_action or action_cls.__pydantic_validator__.validate_python
        max_fields = len(action_cls.model_fields) + EXTRA_FIELDS_ALLOWED
        # What each reset and step adds to /metrics; None with metrics off (server/metrics.py).
        self.tally = tally
        # Checks and runs every step of this endpoint, counted for /metrics (stepping.py).
        self.steps = Stepper(
            manager.runner,
            validate,
            max_fields,
            tally,
            (WS_OK, WS_DONE, WS_INVALID, WS_ERROR, WS_TIMEOUT),
        )
        self.max_message_bytes = max_message_bytes
        self.auth_required = auth_required
        self.capacity_refusal = capacity_refusal  # auto | http | message (see settings.py)
        # Cheap plain steps answered below ASGI (inline_frames.py); never with tracing on.
        self.inline_frames = inline_frames and tracer is None
        # Reference features (server/mcp.py): {"type": "mcp"} frames and /ws?session_id=
        # attaching to a session opened over HTTP.
        self.mcp = mcp
        self.attach = attach
        # Checkpoint and restore (server/sessions/checkpoint_ops.py).
        self.checkpoints = checkpoints
        # Vector sessions (server/ws/vector.py), unless max_vector_envs is 0; their steps
        # are counted apart (transport="vector").
        self.vectors: vector.VectorSessions | None = None
        if max_vector_envs > 0:
            self.vectors = vector.VectorSessions(
                self,
                max_vector_envs,
                Stepper(
                    manager.runner,
                    validate,
                    max_fields,
                    tally,
                    (VECTOR_OK, VECTOR_DONE, VECTOR_INVALID, VECTOR_ERROR, VECTOR_TIMEOUT),
                ),
            )
        # OpenTelemetry (observability/tracing.py): None with tracing off. On, every reset and
        # step is answered inside a span (_traced_dispatch), none at once (no inline steps).
        self.tracer = tracer
        self._answer: Callable[[Session, dict[str, Any]], Awaitable[Any]] = (
            self._dispatch if tracer is None else self._traced_dispatch
        )
        self._now: Callable[[Session, Any], str | None] = (
            self._step_now if tracer is None else _declined
        )
        # The reply to each type of message but a step: see _dispatch.
        self._answers: dict[Any, Callable[[Session, dict[str, Any]], Awaitable[Any]]] = {
            "reset": self._on_reset,
            "state": self._on_state,
            "close": self._on_close,
            "checkpoint": self._on_checkpoint,
            "restore": self._on_checkpoint,
            "mcp": self._on_mcp,
        }

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        session = await self._start(scope, receive, send)
        if session is None:
            return
        state = session.resume
        generation = state.generation if state is not None else 0
        traced = self._traced(scope, session)
        protocol = self._offer_inline(scope, session, state, generation)
        ended_by_client = False
        now = self._now if state is None else _declined
        try:
            # The message loop lives in this frame (not a helper coroutine): one frame less per
            # open session, which is what thousands of idle sessions are made of.
            read, answer, reply_later = self._read, self._answer, self._reply
            while True:
                message = await receive()
                if message["type"] != "websocket.receive" or session.released:
                    return  # disconnect, or the reaper/drain/shutdown closed it
                if state is not None and state.generation != generation:
                    return  # a resuming connection took the session over
                msg = read(message)
                reply = now(session, msg)
                if reply is None and state is None and type(msg) is dict:
                    session.busy = True  # _reply, unrolled: one coroutine less per message
                    try:
                        reply = await answer(session, msg)
                    finally:
                        session.busy = False
                        session.last_active = monotonic()
                elif reply is None:
                    reply = await reply_later(session, state, msg)
                if state is not None and state.generation != generation:
                    return  # taken over while the step ran: its reply is kept for the new one
                if type(reply) is not str:
                    ended_by_client = reply is CLOSE_REPLY
                    await self._last_reply(session, reply, send)
                    return
                await send({"type": "websocket.send", "text": reply})
        except OSError:
            pass  # the client went away while we were sending
        finally:
            await self._finish(session, state, generation, protocol, traced, ended_by_client)

    async def _start(self, scope: dict[str, Any], receive: Any, send: Any) -> Session | None:
        """The connection's session: resumed, restored from a checkpoint or new (``None``:
        refused, and the client told why, or attached to an HTTP session and served)."""
        if self.attach is not None and b"session_id=" in scope.get("query_string", b""):
            await self.attach(self, scope, receive, send)
            return None
        if self.vectors is not None:
            vector_size = vector.requested(scope)
            if vector_size is not None:
                await self.vectors.serve(scope, receive, send, vector_size)
                return None
        key, token = (
            resume.handshake(scope) if self.manager.lifecycle.resume_grace > 0 else (None, None)
        )
        if key is not None and token is not None:
            session = await self._reattach(scope, send, key.decode(), token)
        else:
            start: Blob | None = None
            checkpoints = self.checkpoints
            if checkpoints is not None:  # X-OpenEnv-Restore: checked before any session
                asked = await checkpoints.from_handshake(scope, send)
                if asked is False:
                    return None
                start = asked
            session = await self._open(scope, send, key)
            if session is None:
                return None
            if (
                start is not None
                and checkpoints is not None
                and not await checkpoints.start_from(session, start, send)
            ):
                return None
        if session is not None:
            session.send = send  # lets the reaper, a drain and shutdown close this connection
        return session

    def _traced(self, scope: dict[str, Any], session: Session) -> SessionSpan | None:
        """The session's span, with tracing on."""
        if self.tracer is None:
            return None
        return SessionSpan.open(
            self.tracer, session.label, "ws", context_from_asgi(scope.get("headers", ()))
        )

    def _offer_inline(
        self,
        scope: dict[str, Any],
        session: Session,
        state: resume.ResumeState | None,
        generation: int,
    ) -> Any:
        """The protocol under ASGI, given a frame handler when it answers cheap plain steps
        itself (inline_frames.py); ``None`` when it does not."""
        return offer_frame_handler(
            scope,
            self.inline_frames and type(session.step) is PlainStep,
            lambda: self._inline_handler(session, state, generation),
        )

    async def _finish(
        self,
        session: Session,
        state: resume.ResumeState | None,
        generation: int,
        protocol: Any,
        traced: SessionSpan | None,
        ended_by_client: bool,
    ) -> None:
        """The connection is over: its session detached (to resume) or released."""
        if protocol is not None:
            protocol.frame_handler = None
        if traced is not None:
            traced.end(session.ended_by)
        if state is None or state.generation == generation:
            if not ended_by_client and self.manager.can_detach(session):
                self.manager.detach(session)
            else:
                await self.manager.release(session)

    async def _last_reply(self, session: Session, reply: Any, send: Any) -> None:
        """Send what ends the session: a close, a drain's move, or a step timeout's error."""
        if reply is CLOSE_REPLY:
            await send({"type": "websocket.close", "code": CLOSE_NORMAL})
        elif reply is _MOVE:
            # a new episode while draining: unanswered, so the client starts it elsewhere
            await self.manager.end(session, CLOSE_SERVICE_RESTART, "server draining", "drain")
        else:  # FinalReply
            await send({"type": "websocket.send", "text": reply})
            session.env = None  # abandoned: the runner closes it when its call returns
            await send(
                {"type": "websocket.close", "code": CLOSE_INTERNAL_ERROR, "reason": "step timeout"}
            )

    def _read(self, message: dict[str, Any]) -> Any:
        """The frame's JSON object, or the error reply (a ``str``) that says what is wrong."""
        frame = message.get("text")
        if frame is None:
            frame = message.get("bytes") or b""
        try:  # _parse, unrolled for a valid frame; an invalid one gets its error there
            msg = from_json(frame) if len(frame) <= self.max_message_bytes else None
        except ValueError:
            msg = None
        return msg if type(msg) is dict else self.parse(frame)

    def _step_now(self, session: Session, msg: Any) -> str | None:
        """The reply to a step whose plain ``step()`` runs inline; ``None`` for any other
        message (no coroutine, no await, so nothing else runs meanwhile: the reaper cannot
        see it busy, and the reply is ready when it returns)."""
        step = session.step
        if (
            type(step) is not PlainStep
            or not step.placement.inline
            or type(msg) is not dict
            or msg.get("type") != "step"
        ):
            return None
        try:  # an Observation, not a coroutine: the step runs inline (checked above)
            obs: Any = self.steps.run(session, msg.get("data"))
        except Exception as exc:
            reply = self.failure(session, "step", exc)
        else:
            session.episode_open = not obs.done
            reply = observation_message(obs)
        session.last_active = monotonic()
        return reply

    async def _reply(self, session: Session, state: resume.ResumeState | None, msg: Any) -> Any:
        """The reply to a message that takes the loop's slow way (the session busy meanwhile)."""
        session.busy = True
        try:
            if type(msg) is not dict:
                return msg  # the frame's error
            if state is None:
                return await self._answer(session, msg)
            seq = msg.get("seq")
            if seq is None or msg.get("type") == "close":
                return await self._answer(session, msg)
            return await self._sequenced(session, state, msg, seq)
        finally:
            session.busy = False
            session.last_active = monotonic()

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

    async def answer_frame(self, session: Session, frame: str | bytes) -> Any:
        """One frame's reply, the session busy meanwhile (``mcp.serve_attached``'s frames)."""
        return await self._reply(session, session.resume, self.parse(frame))

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
            reply = await self._answer(session, msg)
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
        run, failure = self.steps.run, self.failure
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
            seq = None if state is None else _new_request(state, generation, msg)
            if seq is False:
                return None
            try:  # an Observation, not a coroutine: the step runs inline (checked above)
                obs: Any = run(session, msg.get("data"))
            except Exception as exc:
                reply = failure(session, "step", exc)
            else:
                session.episode_open = not obs.done
                reply = observation_message(obs)
            session.last_active = monotonic()
            if tally is not None:
                tally.inline_steps += 1
            if seq is not None and state is not None:
                state.last_seq, state.last_reply = seq, reply
            return reply

        return answer

    def failure(self, session: Session, kind: Any, exc: Exception) -> str:
        """The reply when handling a ``kind`` message raised ``exc`` (logged here, unless the
        action was refused)."""
        if isinstance(exc, ActionRefused):
            return error_message(ErrorCode.VALIDATION_ERROR, exc.message, **exc.extra)
        if isinstance(exc, StepTimeout):
            logger.error("session %s ended: %s", session.label, exc)
            self.manager.abandoned += 1
            session.ended_by = "step_timeout"
            return FinalReply(error_message(ErrorCode.STEP_TIMEOUT, str(exc)))
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
            return await self._dispatch(session, msg)
        with traced.request(self.tracer, kind, msg.get(TRACEPARENT)) as span:
            start = perf_counter()
            reply = await self._dispatch(session, msg)
            span.set_attribute("openenv.duration_ms", (perf_counter() - start) * 1000)
            if type(reply) is str or type(reply) is FinalReply:
                record_reply(span, reply)
            elif reply is _MOVE:
                span.set_attribute("openenv.outcome", "moved")
        return reply

    async def _dispatch(self, session: Session, msg: dict[str, Any]) -> Any:
        """The reply to one message: a step's here (one coroutine less per step), any other
        type's from ``_answers``."""
        kind = msg.get("type")
        try:
            if kind == "step":
                obs = self.steps.run(session, msg.get("data"))  # ActionRefused: see failure
                if not isinstance(obs, Observation):
                    obs = await obs
                session.episode_open = not obs.done
                return observation_message(obs)
            answer = self._answers.get(kind) if type(kind) is str else None
            if answer is None:
                return _unknown(kind)
            return await answer(session, msg)
        except Exception as exc:
            return self.failure(session, kind, exc)

    async def _on_reset(self, session: Session, msg: dict[str, Any]) -> Any:
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
        tally = self.tally
        try:
            obs = await self.runner.reset(session.env, options)
        except Exception:
            if tally is not None:
                tally.reset("ws", False, perf_counter() - start)
            raise
        if tally is not None:
            tally.reset("ws", True, perf_counter() - start)
        session.episode_open = not obs.done
        return observation_message(obs)

    async def _on_state(self, session: Session, msg: dict[str, Any]) -> Any:
        state: State = await self.runner.state(session.env)
        return state_message(state)

    async def _on_close(self, session: Session, msg: dict[str, Any]) -> Any:
        return CLOSE_REPLY

    async def _on_checkpoint(self, session: Session, msg: dict[str, Any]) -> Any:
        if self.checkpoints is None:
            return _unknown(msg.get("type"))
        return await self.checkpoints.handle(session, str(msg.get("type")), msg.get("data"))

    async def _on_mcp(self, session: Session, msg: dict[str, Any]) -> Any:
        if self.mcp is None:
            return _unknown(msg.get("type"))
        reply = await self.mcp(msg.get("data"), current=session)
        return encode({"type": "mcp", "data": reply})


def _unknown(kind: Any) -> str:
    """The reply to a message of a type this server does not answer."""
    return error_message(
        ErrorCode.UNKNOWN_TYPE,
        f"Unknown message type {kind!r}; expected one of reset, step, state, close, mcp, checkpoint, restore.",
    )


def _declined(session: Session, msg: Any) -> None:
    """``_now`` of a connection whose steps all take the loop's slow way (resumable, or
    traced: no step is answered without a coroutine there)."""
    return None


def _new_request(state: resume.ResumeState, generation: int, msg: dict[str, Any]) -> Any:
    """A numbered step's ``seq`` when it is a new request the inline path may answer (``None``
    when unnumbered); ``False`` when it is not: taken over, a request in flight, or a repeat or
    bad number (those get their answer in ``_sequenced``)."""
    if state.generation != generation or state.inflight is not None:
        return False
    seq = msg.get("seq")
    if seq is not None and (type(seq) is not int or seq <= state.last_seq):
        return False
    return seq
