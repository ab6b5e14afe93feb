"""Sessions and capacity: one environment instance per session, every slot given back.

A session is a WebSocket connection or an HTTP session opened by ``POST /reset``. Both
count against the same capacity. A session is released exactly once (its environment
``close()``d exactly once) whatever ends it: a close message, a disconnect, the idle
reaper, or server shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..protocol import CLOSE_NORMAL
from .adapter import EnvRunner

logger = logging.getLogger("openenv_runtime.server")


class Session:
    """One client's episode: its environment instance and bookkeeping."""

    __slots__ = (
        "busy",
        "client",
        "env",
        "id",
        "kind",
        "last_active",
        "lock",
        "released",
        "send",
        "step",
    )

    def __init__(self, kind: str, client: str | None = None) -> None:
        self.id = secrets.token_urlsafe(12)
        self.kind = kind
        self.client = client  # who it counts against for the per-client cap
        self.env: Any = None
        self.step: Any = None  # the environment's step, bound once (see EnvRunner.bind_step)
        self.last_active = time.monotonic()
        self.busy = False
        self.released = False
        # HTTP requests of one session run in order; a WebSocket session is ordered by its loop.
        self.lock: asyncio.Lock | None = asyncio.Lock() if kind == "http" else None
        self.send: Callable[[dict[str, Any]], Awaitable[None]] | None = (
            None  # a WebSocket's ASGI send
        )

    async def close_connection(self) -> None:
        """Tell a WebSocket client its session is over (HTTP sessions have no connection)."""
        if self.send is not None:
            try:
                await self.send(
                    {
                        "type": "websocket.close",
                        "code": CLOSE_NORMAL,
                        "reason": "session closed by server",
                    }
                )
            except Exception:  # the connection may already be gone; releasing is what matters
                pass


class SessionManager:
    """Capacity, the session registry and the idle reaper of one worker process."""

    def __init__(
        self,
        runner: EnvRunner,
        capacity: int,
        idle_timeout: float | None,
        per_client: int | None = None,
    ) -> None:
        self.runner = runner
        self.capacity = capacity
        self.idle_timeout = idle_timeout
        self.per_client = per_client
        self.sessions: dict[str, Session] = {}
        self.by_client: dict[str, int] = {}
        self.total_opened = 0
        self.abandoned = 0  # sessions ended by STEP_TIMEOUT; their instances were left to finish
        self._reaper: asyncio.Task[None] | None = None

    @property
    def active(self) -> int:
        return len(self.sessions)

    def count(self, kind: str) -> int:
        return sum(1 for s in self.sessions.values() if s.kind == kind)

    def client_full(self, client: str | None) -> bool:
        """True when ``client`` already holds ``per_client`` sessions (never when there is no cap)."""
        return (
            self.per_client is not None
            and client is not None
            and self.by_client.get(client, 0) >= self.per_client
        )

    def open(self, kind: str, client: str | None = None) -> Session | None:
        """Reserve a slot (synchronously, so no other task can take it meanwhile); None when full."""
        if len(self.sessions) >= self.capacity or self.client_full(client):
            return None
        session = Session(kind, client)
        self.sessions[session.id] = session
        if client is not None:
            self.by_client[client] = self.by_client.get(client, 0) + 1
        self.total_opened += 1
        return session

    async def release(self, session: Session) -> None:
        """Free the slot at once, then close the environment (exactly once)."""
        if session.released:
            return
        session.released = True
        self.sessions.pop(session.id, None)
        if session.client is not None:
            left = self.by_client.get(session.client, 1) - 1
            if left > 0:
                self.by_client[session.client] = left
            else:
                self.by_client.pop(session.client, None)
        env, session.env = session.env, None
        if env is not None:
            try:
                await self.runner.close(env)
            except Exception:
                logger.exception("close() of %s raised", type(env).__qualname__)

    def start_reaper(self) -> None:
        if self.idle_timeout is not None and self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(
                self._reap_forever(), name="openenv-reaper"
            )

    async def _reap_forever(self) -> None:
        assert self.idle_timeout is not None
        interval = min(max(self.idle_timeout / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(interval)
            await self.reap_idle()

    async def reap_idle(self) -> int:
        """Close every session idle for longer than the timeout; returns how many."""
        if self.idle_timeout is None:
            return 0
        deadline = time.monotonic() - self.idle_timeout
        idle = [s for s in self.sessions.values() if not s.busy and s.last_active < deadline]
        for session in idle:
            logger.info(
                "closing %s session %s: idle for more than %ss",
                session.kind,
                session.id,
                self.idle_timeout,
            )
            await session.close_connection()
            await self.release(session)
        return len(idle)

    async def shutdown(self) -> None:
        """Stop the reaper and release every remaining session."""
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        for session in list(self.sessions.values()):
            await session.close_connection()
            await self.release(session)
