"""Sessions and capacity: one environment instance per session, every slot given back.

A session is a WebSocket connection, an HTTP session opened by ``POST /reset`` (or MCP's
``openenv/session/create``), or a short-lived call (a session-less MCP request, a Task API
route, ``/metadata``): every environment instance, however short-lived, counts against the
same capacity and per-client cap.

An HTTP session's id is a secret (32 random bytes) handed only to the client that opened it;
logs name sessions by ``label`` only. A WebSocket session is reachable only from its own
connection (or a resume that presents its token). A session is released exactly once (its
environment ``close()``d exactly once) whatever ends it: a close message, a disconnect, the end of its
resume grace period, the idle reaper, a drain, or server shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from openenv_runtime.protocol import CLOSE_NORMAL
from openenv_runtime.server.config.lifecycle import LifecycleSettings
from openenv_runtime.server.metrics import Tally
from openenv_runtime.server.running.adapter import EnvRunner, StepTimeout
from openenv_runtime.server.sessions.session import NoCapacity, Session
from openenv_runtime.server.sessions.warm_pool import WarmPool

logger = logging.getLogger("openenv_runtime.server")

# How long a release waits for a step still running before closing the instance anyway.
STEP_WAIT_ON_CLOSE = 5.0
# How long shutdown waits for close() calls to return.
CLOSE_WAIT = 10.0
# Idle seconds allowed to an HTTP session that was opened but never stepped (see reap_idle).
UNUSED_SESSION_TIMEOUT = 60.0

__all__ = ["NoCapacity", "Session", "SessionManager"]


class SessionManager:
    """Capacity, the session registry, resume grace, drain and the idle reaper of one worker."""

    def __init__(
        self,
        runner: EnvRunner,
        capacity: int,
        idle_timeout: float | None,
        per_client: int | None = None,
        *,
        lifecycle: LifecycleSettings,
        unused_timeout: float | None = UNUSED_SESSION_TIMEOUT,
    ) -> None:
        self.runner = runner
        self.capacity = capacity
        self.idle_timeout = idle_timeout
        self.unused_timeout = unused_timeout
        self.per_client = per_client
        self.lifecycle = lifecycle
        self.sessions: dict[str, Session] = {}
        self.by_client: dict[str, int] = {}
        self.total_opened = 0
        self.abandoned = 0  # sessions ended by STEP_TIMEOUT; their instances were left to finish
        self.tally = Tally()  # what /metrics reports (server/metrics.py)
        self.tracer: Any = None  # OpenTelemetry's, with tracing on (observability/tracing.py)
        self.draining = False
        self.stopping = False
        self.warm = WarmPool(runner, self.lifecycle.warm_pool, lambda: self.capacity - self.active)
        self._reaper: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def active(self) -> int:
        return len(self.sessions)

    @property
    def detached(self) -> int:
        return sum(1 for s in self.sessions.values() if s.detached)

    @property
    def ready(self) -> bool:
        """Takes new sessions: not draining, not stopping, not full."""
        return not (self.draining or self.stopping) and len(self.sessions) < self.capacity

    def count(self, kind: str) -> int:
        return sum(1 for s in self.sessions.values() if s.kind == kind)

    def client_full(self, client: str | None) -> bool:
        """True when ``client`` already holds ``per_client`` sessions (never when there is no cap)."""
        return (
            self.per_client is not None
            and client is not None
            and self.by_client.get(client, 0) >= self.per_client
        )

    def refusal(self, client: str | None) -> NoCapacity:
        """Why no new session can open now (for the caller to report)."""
        if self.draining or self.stopping:
            return NoCapacity("Server is draining for a restart; retry (on another replica).", 503)
        if self.client_full(client):
            return NoCapacity(
                f"This client already holds {self.per_client} sessions, the most one client "
                "may hold (MAX_SESSIONS_PER_CLIENT); close one first.",
                429,
                max_sessions_per_client=self.per_client,
            )
        return NoCapacity(
            f"Server is at capacity ({self.capacity} sessions); retry later or raise "
            "MAX_CONCURRENT_ENVS.",
            503,
            active_sessions=self.active,
            max_sessions=self.capacity,
        )

    @asynccontextmanager
    async def borrow(self, client: str | None = None) -> AsyncIterator[Any]:
        """A short-lived instance that holds a slot (and counts for ``client``) while in use.

        Raises :class:`NoCapacity` when there is no slot. A call on it that overran the step
        timeout abandoned it to the runner, which closes it when the call returns.
        """
        session = self.open("call", client)
        if session is None:
            raise self.refusal(client)
        session.busy = True  # in use from the start: a drain waits for it
        try:
            env = await self.runner.create()
            if session.released:  # shut down meanwhile: the instance is not handed out
                await self.runner.close(env)
                raise self.refusal(client)
            session.env = env
            _charge_code_runs(env, client)
            yield env
        except StepTimeout:
            session.env = None
            raise
        finally:
            session.busy = False
            await self.release(session)

    def open(
        self, kind: str, client: str | None = None, session_id: str | None = None
    ) -> Session | None:
        """Reserve a slot (synchronously, so no other task can take it meanwhile); None when
        full, draining or the client's cap is reached. ``session_id`` is a client's proposal,
        used when free."""
        if self.draining or self.stopping:
            self.tally.refused["draining",] += 1
            return None
        if self.client_full(client):
            self.tally.refused["client_cap",] += 1
            return None
        if len(self.sessions) >= self.capacity:
            self.tally.refused["capacity",] += 1
            return None
        if session_id is not None and session_id in self.sessions:
            session_id = None
        session = Session(kind, client, session_id)
        self.sessions[session.id] = session
        if client is not None:
            self.by_client[client] = self.by_client.get(client, 0) + 1
        self.total_opened += 1
        self.tally.opened[kind,] += 1
        return session

    async def new_instance(self) -> Any:
        """An environment instance for a session that holds a slot (from the warm pool if any)."""
        self.runner.check_not_exhausted()
        if self.warm.size > 0:
            self.tally.warm["hit",] += 1
            return await self.warm.take()
        self.tally.warm["miss",] += 1
        return await self.runner.create()

    async def hold_tools(self, session: Session) -> None:
        """Keep the MCP connection of the session's environment open until it is released.

        FastMCP's per-session state (``ctx.set_state``) then lasts across the session's tool
        calls. The instance's code-mode runs count against the session's client from here on.
        Raises what connecting raised; the caller releases the session.
        """
        _charge_code_runs(session.env, session.client)
        factory = getattr(session.env, "mcp_session", None)
        if not callable(factory):
            return
        stack = AsyncExitStack()
        try:
            await stack.enter_async_context(factory())
        except BaseException:
            await stack.aclose()
            raise
        session.mcp_stack = stack

    # -- resume ---------------------------------------------------------------------------
    def can_detach(self, session: Session) -> bool:
        return (
            session.resume is not None
            and self.lifecycle.resume_grace > 0
            and not session.released
            and not self.stopping
            and session.env is not None
        )

    def detach(self, session: Session) -> None:
        """The connection dropped: keep the session for the grace period, then release it."""
        state = session.resume
        assert state is not None
        session.send = None
        session.detached = True
        session.last_active = time.monotonic()
        if state.timer is not None:
            state.timer.cancel()
        state.timer = asyncio.get_running_loop().call_later(
            self.lifecycle.resume_grace, self._grace_over, session, state.generation
        )

    def _grace_over(self, session: Session, generation: int) -> None:
        state = session.resume
        if session.detached and state is not None and state.generation == generation:
            logger.info(
                "session %s: not resumed within %ss", session.label, self.lifecycle.resume_grace
            )
            session.ended_by = "resume_expired"
            self.release_soon(session)

    def attach(self, session: Session) -> int:
        """A resuming connection takes the session over; returns its generation."""
        state = session.resume
        assert state is not None
        if state.timer is not None:
            state.timer.cancel()
            state.timer = None
        session.detached = False
        session.last_active = time.monotonic()
        state.generation += 1
        self.tally.resumed += 1
        return state.generation

    # -- ending sessions ------------------------------------------------------------------
    def release_soon(self, session: Session) -> None:
        task = asyncio.get_running_loop().create_task(self.release(session))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def release(self, session: Session) -> None:
        """Free the slot at once, then close the environment (exactly once)."""
        if session.released:
            return
        session.released = True
        self.sessions.pop(session.id, None)
        if session.trace is not None:  # an HTTP session's span (a WebSocket's ends with it)
            session.trace.end(session.ended_by)
            session.trace = None
        self.tally.closed[session.kind, session.ended_by] += 1
        if session.client is not None:
            left = self.by_client.get(session.client, 1) - 1
            if left > 0:
                self.by_client[session.client] = left
            else:
                self.by_client.pop(session.client, None)
        if session.resume is not None and session.resume.timer is not None:
            session.resume.timer.cancel()
        env, session.env = session.env, None
        stack, session.mcp_stack = session.mcp_stack, None
        if env is None:  # abandoned to a running step: still end its MCP connection
            if stack is not None:
                closer = asyncio.get_running_loop().create_task(self._close_stack(stack))
                self._closing.add(closer)
                closer.add_done_callback(self._closing.discard)
            self.warm.kick()
            return
        if session.busy:
            # close() while a step still runs on the instance would race it: wait, within a bound.
            deadline = time.monotonic() + STEP_WAIT_ON_CLOSE
            while session.busy and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            if session.busy:
                logger.warning(
                    "session %s: a step still runs after %ss; closing its environment anyway",
                    session.label,
                    STEP_WAIT_ON_CLOSE,
                )
        # A task of its own: a cancelled caller (server shutdown) cannot skip the close().
        closer = asyncio.get_running_loop().create_task(self._close_env(env, stack))
        self._closing.add(closer)
        closer.add_done_callback(self._closing.discard)
        # refill the warm pool once this instance is gone, never beside it (capacity holds)
        closer.add_done_callback(lambda _: self.warm.kick())
        await asyncio.shield(closer)

    @staticmethod
    async def _close_stack(stack: AsyncExitStack) -> None:
        try:
            await stack.aclose()
        except Exception as exc:
            logger.warning("closing a session's MCP connection failed: %s", exc)

    async def _close_env(self, env: Any, stack: AsyncExitStack | None = None) -> None:
        if stack is not None:
            await self._close_stack(stack)
        try:
            await self.runner.close(env)
        except Exception:
            logger.exception("close() of %s raised", type(env).__qualname__)

    async def end(
        self, session: Session, code: int = CLOSE_NORMAL, reason: str = "", cause: str = "server"
    ) -> None:
        """Close the session's connection (with ``code`` and ``reason``), then release it;
        ``cause`` is what /metrics counts it closed by."""
        if not session.released:
            session.ended_by = cause
        await session.close_connection(code, reason)
        await self.release(session)

    def start(self) -> None:
        """Start the reaper and the warm pool (called at application start-up)."""
        self.stopping = False
        if self.idle_timeout is not None and self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(
                self._reap_forever(), name="openenv-reaper"
            )
        self.warm.closed = False
        self.warm.kick()

    start_reaper = start

    async def _reap_forever(self) -> None:
        assert self.idle_timeout is not None
        shortest = min(self.idle_timeout, self.unused_timeout or self.idle_timeout)
        interval = min(max(shortest / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(interval)
            await self.reap_idle()

    async def reap_idle(self) -> int:
        """Close every session idle for longer than the timeout; returns how many.

        An HTTP session opened but never stepped gets ``unused_timeout`` from its opening,
        when shorter: holding slots with ``POST /reset`` (or ``/state``) alone costs a client
        little, so it buys little time.
        """
        if self.idle_timeout is None:
            return 0
        now = time.monotonic()
        deadline = now - self.idle_timeout
        unused = self.unused_timeout
        unused_deadline = now - unused if unused is not None else deadline
        idle = [
            s
            for s in self.sessions.values()
            if not s.busy
            and s.kind != "call"
            and (s.last_active < deadline or (not s.stepped and s.opened < unused_deadline))
        ]
        for session in idle:
            logger.info(
                "closing %s session %s: idle for more than %ss",
                session.kind,
                session.label,
                self.idle_timeout if session.stepped else min(self.idle_timeout, unused or 0),
            )
            await self.end(session, cause="idle")
        return len(idle)

    async def shutdown(self) -> None:
        """Stop the reaper and release every remaining session and warm instance, each once."""
        self.stopping = True
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        await asyncio.gather(
            *(
                self.end(s, 1001, "server shutting down", cause="shutdown")
                for s in list(self.sessions.values())
            )
        )
        await self.warm.close()
        if self._closing:
            await asyncio.wait(set(self._closing), timeout=CLOSE_WAIT)


def _charge_code_runs(env: Any, client: str | None) -> None:
    """Count the instance's code-mode runs against ``client``'s share of the worker slots
    (``MCPEnvironment.code_client``; other environments have no code mode)."""
    if hasattr(type(env), "code_client"):
        env.code_client = client
