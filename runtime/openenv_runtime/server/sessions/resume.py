"""Resuming a WebSocket session after its connection dropped.

The protocol rides on the WebSocket handshake, so clients that know nothing of it (openenv-core)
see no difference:

* A client opts in by sending ``X-OpenEnv-Session: <key>`` (a random id it chose; the same
  header lets a load balancer hash resuming connections to the same replica). The server
  answers the handshake with ``X-OpenEnv-Session`` (the session's id), ``X-OpenEnv-Resume-Token``
  (a secret) and ``X-OpenEnv-Resume-Grace`` (seconds).
* Each request of such a session carries ``"seq": n`` (1, 2, ...). The server keeps the last
  reply; a request whose ``seq`` was already answered gets that reply again, one still running
  gets its reply when it ends: no step is applied twice or lost.
* A connection that drops without a ``close`` message leaves the session detached for the grace
  period, still holding its slot. A new connection with ``X-OpenEnv-Session`` and
  ``X-OpenEnv-Resume-Token`` re-attaches to the same environment instance (the handshake answer
  carries ``X-OpenEnv-Resumed: <last seq>``). An unknown or expired session, and a wrong token,
  get the same HTTP 410 (so a refusal tells no one whether a session exists); tokens are
  compared in constant time and never logged.
"""

from __future__ import annotations

import asyncio
import hmac
import re
import secrets
from typing import Any

from pydantic_core import to_json

HEADER_SESSION = b"x-openenv-session"
HEADER_TOKEN = b"x-openenv-resume-token"
HEADER_GRACE = b"x-openenv-resume-grace"
HEADER_RESUMED = b"x-openenv-resumed"

SESSION_GONE = "SESSION_GONE"

_KEY = re.compile(rb"[A-Za-z0-9_-]{16,64}")
_DUMMY_TOKEN = secrets.token_urlsafe(32).encode()


class ResumeState:
    """What a resumable session keeps between connections."""

    __slots__ = (
        "generation",
        "inflight",
        "inflight_seq",
        "last_reply",
        "last_seq",
        "timer",
        "token",
    )

    def __init__(self) -> None:
        self.token = secrets.token_urlsafe(32).encode()
        self.generation = 0  # bumped on each attach: a superseded connection's loop stops
        self.last_seq = 0
        self.last_reply: str | None = None
        self.inflight_seq: int | None = None
        self.inflight: asyncio.Future[str] | None = None
        self.timer: asyncio.TimerHandle | None = None  # the grace period of a detached session

    def token_matches(self, presented: bytes) -> bool:
        return hmac.compare_digest(presented, self.token)


def handshake(scope: dict[str, Any]) -> tuple[bytes | None, bytes | None]:
    """``(session key, resume token)`` from the handshake headers; a malformed key counts as none."""
    key = token = None
    for name, value in scope.get("headers", ()):
        if name == HEADER_SESSION:
            key = value.strip()
        elif name == HEADER_TOKEN:
            token = value.strip()
    if key is not None and not _KEY.fullmatch(key):
        key = None
    return key, token


def refuse_unknown(presented: bytes) -> None:
    """Spend the same comparison on an unknown session as on a known one."""
    hmac.compare_digest(presented, _DUMMY_TOKEN)


def accept_headers(session_id: str, state: ResumeState, grace: float) -> list[tuple[bytes, bytes]]:
    return [
        (HEADER_SESSION, session_id.encode()),
        (HEADER_TOKEN, state.token),
        (HEADER_GRACE, f"{grace:g}".encode()),
    ]


def can_refuse_with_status(scope: dict[str, Any]) -> bool:
    """Whether the ASGI server lets this handshake be answered with an HTTP status."""
    return "websocket.http.response" in scope.get("extensions", {})


async def refuse_handshake(
    scope: dict[str, Any],
    send: Any,
    status: int,
    code: str,
    message: str,
    close_code: int,
    retry_after: int | None = None,
) -> None:
    """Answer the handshake with an HTTP error (so load balancers and clients see a status).

    ``retry_after`` (seconds) adds a ``Retry-After`` header: the refusal is temporary.
    """
    body = (
        b'{"type":"error","data":{"code":"'
        + code.encode()
        + b'","message":'
        + to_json(message)
        + b"}}"
    )
    if can_refuse_with_status(scope):
        headers = [(b"content-type", b"application/json"), (b"x-openenv-error", code.encode())]
        if retry_after is not None:
            headers.append((b"retry-after", str(retry_after).encode()))
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:  # an ASGI server without the extension: HTTP 403 is all it can say
        await send({"type": "websocket.close", "code": close_code, "reason": code})
