"""Vector sessions: one WebSocket connection driving N environment instances, one message a batch.

An extension of the ``/ws`` protocol that clients which never ask for it never see. A client
asks in the handshake, ``X-OpenEnv-Vector: N``; a server that knows the extension answers with
the same header, and the connection then holds N instances, each counted as one session against
``MAX_CONCURRENT_ENVS`` and ``MAX_SESSIONS_PER_CLIENT`` (a server without N free slots refuses
the handshake: HTTP 503 ``CAPACITY_REACHED``; an N outside 1..``OPENENV_MAX_VECTOR_ENVS``: HTTP
400 ``VECTOR_INVALID``). A server that does not know the header opens a plain session and does
not echo it; ``/health`` says ``max_vector_envs`` so a client can tell before it connects.

Messages on a vector session (each answered once, like single ones):

* ``{"type": "reset", "data": {"envs": [OPTIONS | null, ...]}}`` — one entry per instance:
  a single reset's data (``{"seed": 3}``), or ``null`` to leave it alone.
* ``{"type": "step", "data": {"actions": [ACTION | null, ...], "reset": [i, ...],
  "reset_ended": false}}`` — one action per instance (``null``: not stepped); the instances
  listed in ``reset`` are reset (no seed) instead of stepped; with ``reset_ended`` an instance
  whose step ends its episode is reset at once (Gymnasium's same-step autoreset).
* ``{"type": "state"}``, ``{"type": "close"}``.

Replies: ``{"type": "observations", "data": {"results": [R | null, ...]}}`` where each ``R`` is
exactly the single reply the instance would have sent (an ``observation`` or ``error``
message), plus ``"resets": [...]`` (the fresh episodes' first observations) with
``reset_ended``; ``{"type": "states", "data": {"states": [...]}}``. A malformed batch (a
list of the wrong length, an invalid action, an unknown key) is refused whole with
``VALIDATION_ERROR`` naming the entry, and no instance moves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine
from time import monotonic
from typing import Any, Protocol

from openenv_runtime.models import Observation
from openenv_runtime.protocol import (
    CLOSE_INTERNAL_ERROR,
    CLOSE_NORMAL,
    CLOSE_POLICY_VIOLATION,
    CLOSE_SERVICE_RESTART,
    CLOSE_TRY_AGAIN_LATER,
    ErrorCode,
    error_message,
    observation_message,
    state_message,
)
from openenv_runtime.server.guards.auth import selected_subprotocol
from openenv_runtime.server.guards.limits import client_identity
from openenv_runtime.server.running.adapter import StepTimeout
from openenv_runtime.server.sessions import resume
from openenv_runtime.server.sessions.registry import SessionManager
from openenv_runtime.server.sessions.session import Session
from openenv_runtime.server.stepping import ActionRefused, Stepper
from openenv_runtime.server.ws.handshake import RETRY_AFTER_SECONDS, describe_exception

logger = logging.getLogger("openenv_runtime.server")

HEADER = b"x-openenv-vector"
"""The handshake header that asks for (and, echoed, grants) a vector session of N instances."""
INVALID = "VECTOR_INVALID"
"""The ``X-OpenEnv-Error`` of a refused handshake whose N is not a number in range."""

_STEP_KEYS = frozenset({"actions", "reset", "reset_ended"})
_END = object()  # the session is over (close asked, a timeout, a drain)


def requested(scope: dict[str, Any]) -> bytes | None:
    """The ``X-OpenEnv-Vector`` header's value, or None for a plain session."""
    for name, value in scope.get("headers", ()):
        if name == HEADER:
            return bytes(value)
    return None


class Endpoint(Protocol):
    """What a vector session uses of the ``/ws`` endpoint (``websocket.WebSocketEndpoint``)."""

    manager: SessionManager
    auth_required: bool

    def parse(self, frame: str | bytes) -> Any: ...

    def failure(self, session: Session, kind: Any, exc: Exception) -> str: ...


class _Refused(Exception):
    """A batch refused whole: its error reply."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.reply = error_message(ErrorCode.VALIDATION_ERROR, message)


class VectorSessions:
    """Serves the vector sessions of one ``/ws`` endpoint; ``steps`` checks, runs and counts
    each environment's step (the server's one step function, ``stepping.py``)."""

    def __init__(self, endpoint: Endpoint, max_envs: int, steps: Stepper) -> None:
        self.endpoint = endpoint
        self.manager = endpoint.manager
        self.runner = endpoint.manager.runner
        self.max_envs = max_envs
        self.steps = steps

    async def serve(self, scope: dict[str, Any], receive: Any, send: Any, value: bytes) -> None:
        """The whole life of one vector session, from its handshake to its last instance closed."""
        sessions = await self._open(scope, send, value)
        if sessions is None:
            return
        sessions[0].send = send  # lets the reaper, a drain and shutdown close the connection
        manager = self.manager
        try:
            while True:
                message = await receive()
                if message["type"] != "websocket.receive" or any(s.released for s in sessions):
                    return
                frame = message.get("text")
                if frame is None:
                    frame = message.get("bytes") or b""
                msg = self.endpoint.parse(frame)
                if type(msg) is not dict:
                    reply: Any = msg
                else:
                    for s in sessions:
                        s.busy = True
                    try:
                        reply = await self._dispatch(sessions, msg)
                    finally:
                        now = monotonic()
                        for s in sessions:
                            s.busy = False
                            s.last_active = now
                if reply is _END:
                    code = CLOSE_SERVICE_RESTART if manager.draining else CLOSE_NORMAL
                    await send({"type": "websocket.close", "code": code})
                    return
                if type(reply) is tuple:  # a step timeout: the reply, then the session ends
                    await send({"type": "websocket.send", "text": reply[0]})
                    await send(
                        {
                            "type": "websocket.close",
                            "code": CLOSE_INTERNAL_ERROR,
                            "reason": "step timeout",
                        }
                    )
                    return
                await send({"type": "websocket.send", "text": reply})
        except OSError:
            pass  # the client went away while we were sending
        finally:
            sessions[0].send = None
            await asyncio.gather(*(manager.release(s) for s in sessions))

    async def _open(self, scope: dict[str, Any], send: Any, value: bytes) -> list[Session] | None:
        """N slots, the handshake answer, N instances; or the refusal, and None."""
        manager = self.manager
        try:
            n = int(value.decode("ascii")) if len(value) <= 8 else 0
        except (UnicodeDecodeError, ValueError):
            n = 0
        if not 1 <= n <= self.max_envs:
            await resume.refuse_handshake(
                scope,
                send,
                400,
                INVALID,
                f"X-OpenEnv-Vector must be a number of environments from 1 to {self.max_envs} "
                "(OPENENV_MAX_VECTOR_ENVS on the server).",
                CLOSE_POLICY_VIOLATION,
            )
            return None
        client = client_identity(scope, self.endpoint.auth_required)
        sessions: list[Session] = []
        for _ in range(n):
            session = manager.open("ws", client)
            if session is None:
                break
            sessions.append(session)
        if len(sessions) < n:
            refusal = manager.refusal(client)
            for session in sessions:
                await manager.release(session)
            code = "DRAINING" if manager.draining or manager.stopping else "CAPACITY_REACHED"
            await resume.refuse_handshake(
                scope,
                send,
                refusal.status,
                code,
                f"A vector session of {n} environments needs {n} free slots. {refusal.message}",
                CLOSE_TRY_AGAIN_LATER,
                retry_after=RETRY_AFTER_SECONDS,
            )
            return None
        try:
            await send(
                {
                    "type": "websocket.accept",
                    "subprotocol": selected_subprotocol(scope),
                    "headers": [(HEADER, str(n).encode())],
                }
            )
            envs = await asyncio.gather(
                *(manager.new_instance() for _ in sessions), return_exceptions=True
            )
            for session, env in zip(sessions, envs, strict=True):
                if not isinstance(env, BaseException):
                    session.env = env
                    session.step = self.runner.bind_step(env)
            failed = next((e for e in envs if isinstance(e, BaseException)), None)
            if failed is not None:
                raise failed
            for session in sessions:  # as a single session: code-mode runs count for its client
                await manager.hold_tools(session)
        except OSError:
            await asyncio.gather(*(manager.release(s) for s in sessions))
            return None
        except Exception as exc:
            logger.error("creating the environments of a vector session failed: %s", exc)
            for session in sessions:
                session.ended_by = "factory_error"
            await asyncio.gather(*(manager.release(s) for s in sessions))
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
            return None
        return sessions

    async def _dispatch(self, sessions: list[Session], msg: dict[str, Any]) -> Any:
        kind = msg.get("type")
        try:
            if kind == "step":
                return await self._step(sessions, msg.get("data"))
            if kind == "reset":
                if self.manager.draining:
                    return _END  # a new episode while draining: started elsewhere
                return await self._reset(sessions, msg.get("data"))
            if kind == "state":
                states = await asyncio.gather(*(self.runner.state(s.env) for s in sessions))
                return (
                    '{"type":"states","data":{"states":['
                    + ",".join(state_message(state) for state in states)
                    + "]}}"
                )
            if kind == "close":
                return _END
        except _Refused as refused:
            return refused.reply
        except Exception as exc:  # state() raised or overran
            if isinstance(exc, StepTimeout):
                return (self._failure(sessions, 0, kind, exc),)
            return error_message(ErrorCode.EXECUTION_ERROR, describe_exception(exc))
        return error_message(
            ErrorCode.UNKNOWN_TYPE,
            f"Unknown message type {kind!r}; a vector session takes reset, step, state, close.",
        )

    def _entries(self, data: Any, key: str, n: int) -> list[Any]:
        if type(data) is not dict or type(data.get(key)) is not list:
            raise _Refused(f'{key} must be a list of {n} entries: {{"{key}": [...]}}.')
        entries: list[Any] = data[key]
        if len(entries) != n:
            raise _Refused(f"{key} has {len(entries)} entries; this session has {n} environments.")
        return entries

    async def _reset(self, sessions: list[Session], data: Any) -> Any:
        n = len(sessions)
        if type(data) is dict and len(data) != 1:
            raise _Refused('reset data takes one key, "envs".')
        entries = self._entries(data, "envs", n)
        for i, options in enumerate(entries):
            if options is not None and type(options) is not dict:
                raise _Refused(f'envs[{i}] must be an object, e.g. {{"seed": 1}}, or null.')
        results: list[str | None] = [None] * n
        timeout = await self._resets(
            sessions, [(i, o) for i, o in enumerate(entries) if o is not None], results
        )
        return self._reply(results, None, timeout)

    async def _resets(
        self,
        sessions: list[Session],
        jobs: list[tuple[int, dict[str, Any]]],
        results: list[str | None],
    ) -> bool:
        """Reset ``jobs`` (index, options) at once; their replies go in ``results``. True when
        one overran the step timeout (its session is then over)."""
        if not jobs:
            return False
        outcome = await self.runner.reset_many([(sessions[i].env, o) for i, o in jobs])
        timeout = False
        for (i, _), obs in zip(jobs, outcome, strict=True):
            if isinstance(obs, Exception):
                results[i] = self._failure(sessions, i, "reset", obs)
                timeout = timeout or isinstance(obs, StepTimeout)
                continue
            sessions[i].episode_open = not obs.done
            results[i] = observation_message(obs)
        return timeout

    async def _step(self, sessions: list[Session], data: Any) -> Any:
        n = len(sessions)
        entries = self._entries(data, "actions", n)
        assert type(data) is dict
        unknown = data.keys() - _STEP_KEYS
        if unknown:
            raise _Refused(
                f"step data has unknown keys {sorted(unknown)!r}; it takes actions, reset, reset_ended."
            )
        resetting = data.get("reset") or []
        if type(resetting) is not list or len(resetting) > n:
            raise _Refused(f"reset must be a list of at most {n} environment indices.")
        reset_set: set[int] = set()
        for i in resetting:
            if type(i) is not int or not 0 <= i < n or i in reset_set:
                raise _Refused(f"reset must list distinct indices from 0 to {n - 1}, got {i!r}.")
            reset_set.add(i)
        reset_ended = data.get("reset_ended", False)
        if type(reset_ended) is not bool:
            raise _Refused("reset_ended must be true or false.")
        steps = self.steps
        actions: list[Any] = [None] * n
        for i, entry in enumerate(entries):  # every action checked before any instance moves
            if entry is None or i in reset_set:
                continue
            try:
                actions[i] = steps.action(entry)
            except ActionRefused as refused:
                raise _Refused(f"actions[{i}]: {refused.message}") from None
        results: list[str | None] = [None] * n
        timeout = await self._resets(sessions, [(i, dict[str, Any]()) for i in resetting], results)
        waiting: list[Awaitable[bool]] = []
        for i, action in enumerate(actions):
            if action is None:
                continue
            try:  # checked above: the model passes it as is
                obs = steps.run(sessions[i], action)
            except Exception as exc:
                results[i] = self._failure(sessions, i, "step", exc)
                continue
            if isinstance(obs, Observation):  # run inline: no coroutine
                sessions[i].episode_open = not obs.done
                results[i] = observation_message(obs)
            else:
                waiting.append(self._step_one(sessions, i, obs, results))
        if waiting:
            timeout = any(await asyncio.gather(*waiting)) or timeout
        fresh: list[str | None] | None = None
        if reset_ended and not timeout:
            fresh = [None] * n
            ended: list[tuple[int, dict[str, Any]]] = [
                (i, {})
                for i in range(n)
                if actions[i] is not None and sessions[i].episode_open is False
            ]
            timeout = await self._resets(sessions, ended, fresh)
        return self._reply(results, fresh, timeout)

    async def _step_one(
        self,
        sessions: list[Session],
        i: int,
        stepping: Coroutine[Any, Any, Observation],
        results: list[str | None],
    ) -> bool:
        try:
            obs = await stepping
        except Exception as exc:
            results[i] = self._failure(sessions, i, "step", exc)
            return isinstance(exc, StepTimeout)
        sessions[i].episode_open = not obs.done
        results[i] = observation_message(obs)
        return False

    def _failure(self, sessions: list[Session], i: int, kind: Any, exc: Exception) -> str:
        if isinstance(exc, StepTimeout):
            logger.error("vector session %s ended: %s", sessions[0].label, exc)
            self.manager.abandoned += 1
            sessions[i].ended_by = "step_timeout"
            sessions[i].env = None  # abandoned: the runner closes it when its call returns
            return error_message(ErrorCode.STEP_TIMEOUT, str(exc))
        return self.endpoint.failure(sessions[i], f"{kind} of env {i}", exc)

    @staticmethod
    def _reply(results: list[str | None], fresh: list[str | None] | None, timeout: bool) -> Any:
        text = ",".join("null" if r is None else r for r in results)
        if fresh is None:
            reply = '{"type":"observations","data":{"results":[' + text + "]}}"
        else:
            resets = ",".join("null" if r is None else r for r in fresh)
            reply = (
                '{"type":"observations","data":{"results":['
                + text
                + '],"resets":['
                + resets
                + "]}}"
            )
        return (reply,) if timeout else reply
