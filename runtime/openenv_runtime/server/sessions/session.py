"""One session: its environment instance, its bookkeeping, and how its connection is told it ended.

:class:`Session` is what the session registry (:mod:`.sessions`) holds; :class:`NoCapacity` is
what it raises when no slot is left.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

from openenv_runtime.protocol import CLOSE_NORMAL
from openenv_runtime.server.sessions.resume import ResumeState

_LABELS = itertools.count(1)


class NoCapacity(Exception):
    """No slot for a new instance: the server is full, draining, or the client's cap is reached."""

    def __init__(self, message: str, status: int, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.status = status  # 429 (this client's cap) or 503 (full, draining)
        self.details = details


class Session:
    """One client's episode: its environment instance and bookkeeping."""

    __slots__ = (
        "busy",
        "client",
        "detached",
        "ended_by",
        "env",
        "episode_open",
        "id",
        "kind",
        "label",
        "last_active",
        "lock",
        "mcp_stack",
        "opened",
        "released",
        "resume",
        "send",
        "step",
        "stepped",
        "trace",
    )

    def __init__(self, kind: str, client: str | None = None, session_id: str | None = None) -> None:
        # An HTTP session's id is its only credential: long, random, never logged.
        self.id = session_id or secrets.token_urlsafe(32)
        self.label = f"#{next(_LABELS)}"  # what logs call it
        self.kind = kind
        self.client = client  # who it counts against for the per-client cap
        self.env: Any = None
        self.mcp_stack: AsyncExitStack | None = None  # the held MCP connection, if any
        self.step: Any = None  # the environment's step, bound once (see EnvRunner.bind_step)
        self.last_active = self.opened = time.monotonic()
        self.busy = False
        self.released = False
        self.detached = False
        self.ended_by = "client"  # why it ended, for /metrics (whoever ends it says so first)
        # None: never reset; True: an episode runs (a drain lets it finish); False: it ended
        self.episode_open: bool | None = None
        # HTTP sessions: stepped (or a tool called) at least once; an unused one is reaped sooner
        self.stepped = kind != "http"
        self.resume: ResumeState | None = None  # set when the client opted into resuming
        self.trace: Any = None  # an HTTP session's span, with tracing on (http_api.py)
        # HTTP requests of one session run in order; a WebSocket session is ordered by its loop.
        self.lock: asyncio.Lock | None = asyncio.Lock() if kind == "http" else None
        self.send: Callable[[dict[str, Any]], Awaitable[None]] | None = (
            None  # a WebSocket's ASGI send
        )

    async def close_connection(self, code: int = CLOSE_NORMAL, reason: str = "") -> None:
        """Tell a WebSocket client its session is over (HTTP sessions have no connection)."""
        send, self.send = self.send, None
        if send is not None:
            try:
                await send(
                    {
                        "type": "websocket.close",
                        "code": code,
                        "reason": reason or "session closed by server",
                    }
                )
            except Exception:  # the connection may already be gone; releasing is what matters
                pass
