"""Opening a WebSocket session: a slot and an instance, or the refusal that says why not.

The handshake half of :class:`~openenv_runtime.server.ws.endpoint.WebSocketEndpoint`: a new
session (capacity, the per-client cap, a draining server, a failing factory), and a resuming
connection taking its session back (``X-OpenEnv-Resume``).
"""

from __future__ import annotations

import logging
from typing import Any

from openenv_runtime.observability.tracing import FRAMES_HEADER
from openenv_runtime.protocol import (
    CLOSE_INTERNAL_ERROR,
    CLOSE_NORMAL,
    CLOSE_POLICY_VIOLATION,
    CLOSE_TRY_AGAIN_LATER,
    ErrorCode,
    error_message,
)
from openenv_runtime.server.guards.auth import selected_subprotocol
from openenv_runtime.server.guards.limits import client_identity
from openenv_runtime.server.running.adapter import Exhausted, StepTimeout
from openenv_runtime.server.sessions import resume
from openenv_runtime.server.sessions.registry import Session, SessionManager

logger = logging.getLogger("openenv_runtime.server")

HEADER_BALANCER = b"x-openenv-balancer"
"""Added by the load balancers ``openenv deploy`` renders: a full server answers HTTP 503."""
RETRY_AFTER_SECONDS = 1
TRACE_FRAMES = (FRAMES_HEADER.encode(), b"1")


def describe_exception(exc: BaseException) -> str:
    """A one-line description for the client; the traceback stays in the server log."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class SessionOpening:
    """The handshake of ``/ws``: mixed into the endpoint, which sets these attributes."""

    manager: SessionManager
    runner: Any
    auth_required: bool
    capacity_refusal: str
    tracer: Any  # None unless tracing is on: then the handshake says frames may carry traceparent

    async def _open(self, scope: dict[str, Any], send: Any, key: bytes | None) -> Session | None:
        """A new session: a slot, the handshake answer, an environment instance."""
        manager = self.manager
        if manager.draining or manager.stopping:
            manager.tally.refused["draining",] += 1
            await resume.refuse_handshake(
                scope,
                send,
                503,
                "DRAINING",
                "This server is draining for a restart and takes no new sessions; retry "
                "(a load balancer sends you to another replica).",
                CLOSE_TRY_AGAIN_LATER,
                retry_after=RETRY_AFTER_SECONDS,
            )
            return None
        client = client_identity(scope, self.auth_required)
        session = manager.open("ws", client, key.decode() if key is not None else None)
        subprotocol = selected_subprotocol(scope)
        if session is None and manager.client_full(client):
            await send({"type": "websocket.accept", "subprotocol": subprotocol})
            await send(
                {
                    "type": "websocket.send",
                    "text": error_message(
                        ErrorCode.CAPACITY_REACHED,
                        f"This client already holds {manager.per_client} sessions, the most "
                        "one client may hold (MAX_SESSIONS_PER_CLIENT); close one first.",
                        max_sessions_per_client=manager.per_client,
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
            return None
        if session is None and self._refuse_with_status(scope):
            # Before the upgrade, so a load balancer can try another replica (Envoy retries
            # a 503 on a host it has not tried); a direct client gets the same code.
            await resume.refuse_handshake(
                scope,
                send,
                503,
                ErrorCode.CAPACITY_REACHED.value,
                f"Server is at capacity ({manager.capacity} sessions); retry later or raise "
                "MAX_CONCURRENT_ENVS.",
                CLOSE_TRY_AGAIN_LATER,
                retry_after=RETRY_AFTER_SECONDS,
            )
            return None
        if session is None:
            await send({"type": "websocket.accept", "subprotocol": subprotocol})
            await send(
                {
                    "type": "websocket.send",
                    "text": error_message(
                        ErrorCode.CAPACITY_REACHED,
                        f"Server is at capacity ({manager.capacity} sessions); retry later or raise "
                        "MAX_CONCURRENT_ENVS.",
                        active_sessions=manager.active,
                        max_sessions=manager.capacity,
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
            return None
        headers: list[tuple[bytes, bytes]] = []
        if key is not None:
            session.resume = resume.ResumeState()
            headers = resume.accept_headers(
                session.id, session.resume, manager.lifecycle.resume_grace
            )
        if self.tracer is not None:
            headers.append(TRACE_FRAMES)
        try:
            await send({"type": "websocket.accept", "subprotocol": subprotocol, "headers": headers})
            session.env = await manager.new_instance()
            await manager.hold_tools(session)
            session.step = self.runner.bind_step(session.env)
        except OSError:
            await manager.release(session)
            return None
        except Exception as exc:
            if isinstance(exc, (StepTimeout, Exhausted)):  # said in full: no traceback to add
                logger.error("creating the environment failed: %s", exc)
            else:
                logger.exception("creating the environment failed")
            if isinstance(exc, StepTimeout):
                session.env = None  # abandoned: closed when its constructor returns
            session.ended_by = "factory_error"
            await manager.release(session)
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
        return session

    def _refuse_with_status(self, scope: dict[str, Any]) -> bool:
        """Whether a full server answers this handshake with HTTP 503 (else CAPACITY_REACHED after it)."""
        mode = self.capacity_refusal
        if mode == "message" or not resume.can_refuse_with_status(scope):
            return False
        if mode == "http":
            return True
        return any(name == HEADER_BALANCER for name, _ in scope.get("headers", ()))

    async def _reattach(
        self, scope: dict[str, Any], send: Any, session_id: str, token: bytes
    ) -> Session | None:
        """A resuming connection: the same session back, or HTTP 410 (gone), the same answer
        whether the session is unknown or the token is wrong (it tells no one a session exists)."""
        manager = self.manager
        session = manager.sessions.get(session_id)
        state = session.resume if session is not None else None
        if session is None or state is None or session.released or session.env is None:
            resume.refuse_unknown(token)
            matches = False
        else:
            matches = state.token_matches(token)
            if not matches:
                logger.warning("session %s: resume refused (wrong token)", session.label)
        if session is None or state is None or not matches:
            await resume.refuse_handshake(
                scope,
                send,
                410,
                resume.SESSION_GONE,
                "This session is gone (its grace period ended, or the server restarted), or "
                "the resume token is not its own; start a new one.",
                CLOSE_NORMAL,
            )
            return None
        previous = session.send
        manager.attach(session)
        if previous is not None:  # a half-open old connection: the new one wins
            try:
                await previous(
                    {
                        "type": "websocket.close",
                        "code": CLOSE_POLICY_VIOLATION,
                        "reason": "session resumed on another connection",
                    }
                )
            except Exception:
                pass
        await send(
            {
                "type": "websocket.accept",
                "subprotocol": selected_subprotocol(scope),
                "headers": [(resume.HEADER_RESUMED, str(state.last_seq).encode())]
                + ([TRACE_FRAMES] if self.tracer is not None else []),
            }
        )
        logger.info("session %s resumed", session.label)
        return session
