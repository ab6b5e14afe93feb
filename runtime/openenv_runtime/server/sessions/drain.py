"""Draining a server for a rolling update.

While draining, a server takes no new session (``/ready`` answers 503, a new WebSocket gets
HTTP 503, ``/health`` says ``"status": "draining"``) and lets running episodes go on for up to
the drain timeout. A session whose episode is over ends at its next ``reset`` (left
unanswered: the closing code 1012 tells the client to start that episode elsewhere, which
``EnvClient`` does by itself) or after 2 s idle; one that never reset ends at once. When no session is left, or the timeout
passes, every remaining session is closed (each environment ``close()``d once).

A drain starts on SIGTERM (``openenv serve`` and ``python -m openenv_runtime.serve``), or by
``POST /admin/drain`` with ``X-OpenEnv-Admin-Token: <OPENENV_ADMIN_TOKEN>``. With several
workers the request reaches one of them; it asks the supervisor (``SIGUSR1``), which passes
the request to every worker, so the whole server drains.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import signal
import time

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from openenv_runtime.protocol import CLOSE_GOING_AWAY, CLOSE_SERVICE_RESTART
from openenv_runtime.server.sessions.registry import SessionManager

logger = logging.getLogger("openenv_runtime.server")

SUPERVISOR_VARIABLE = "OPENENV_SUPERVISOR_PID"
"""Set in each worker of a multi-worker server: the process that runs them."""
DRAIN_SIGNAL = signal.SIGUSR1
"""Sent to the supervisor by the worker that took ``POST /admin/drain``, then to every worker."""
BETWEEN_EPISODES = 2.0  # seconds a drained session may sit idle between episodes

# The session managers of the apps running in this process (registered at start-up), so a
# signal handler outside the app can drain them all.
_managers: set[SessionManager] = set()


def register(manager: SessionManager) -> None:
    _managers.add(manager)


def unregister(manager: SessionManager) -> None:
    _managers.discard(manager)


async def drain(manager: SessionManager, timeout: float | None = None) -> None:
    """Drain one manager: returns once it holds no session (within ``timeout`` plus close time)."""
    if timeout is None:
        timeout = manager.lifecycle.drain_timeout
    first = not manager.draining
    manager.draining = True
    if first:
        logger.info(
            "draining: %d session(s) may run for up to %ss; no new sessions",
            manager.active,
            timeout,
        )
    deadline = time.monotonic() + timeout
    while manager.sessions:
        now = time.monotonic()
        for session in list(manager.sessions.values()):
            if session.busy or session.episode_open:
                continue
            # never reset: end it now; between episodes: after a pause (the client may still
            # read the state of the episode that just ended); its next reset moves it anyway
            if session.episode_open is None or now - session.last_active > BETWEEN_EPISODES:
                await manager.end(session, CLOSE_SERVICE_RESTART, "server draining", "drain")
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.05)
    left = list(manager.sessions.values())
    if left:
        logger.info("drain timeout: closing %d running session(s)", len(left))
        await asyncio.gather(
            *(manager.end(s, CLOSE_GOING_AWAY, "server draining", "drain") for s in left)
        )


async def drain_all(timeout: float | None = None) -> None:
    """Drain every app of this process at once."""
    await asyncio.gather(*(drain(m, timeout) for m in list(_managers)))


def drain_timeout() -> float:
    """The longest drain timeout among this process's apps (0 when none is running)."""
    return max((m.lifecycle.drain_timeout for m in _managers), default=0.0)


def install_lifecycle_routes(app: FastAPI, manager: SessionManager) -> None:
    """``GET /ready`` (readiness) and ``POST /admin/drain`` (token-protected)."""

    @app.get("/ready", tags=["info"], summary="Readiness: 200 when taking new sessions")
    async def ready() -> JSONResponse:
        if manager.draining:
            status = "draining"
        elif not manager.ready:
            status = "full"
        elif manager.runner.exhausted:  # every new session would be refused until calls return
            status = "exhausted"
        else:
            status = "ready"
        return JSONResponse(
            {"status": status, "active_sessions": manager.active, "max_sessions": manager.capacity},
            status_code=200 if status == "ready" else 503,
        )

    @app.post("/admin/drain", tags=["admin"], summary="Start draining (needs OPENENV_ADMIN_TOKEN)")
    async def admin_drain(request: Request) -> JSONResponse:
        expected = os.environ.get("OPENENV_ADMIN_TOKEN", "")
        presented = request.headers.get("x-openenv-admin-token", "")
        if not expected:
            return JSONResponse(
                {"detail": "Set OPENENV_ADMIN_TOKEN on the server to enable /admin/drain."},
                status_code=404,
            )
        if not hmac.compare_digest(presented.encode(), expected.encode()):
            return JSONResponse(
                {"detail": "Send the header X-OpenEnv-Admin-Token: <OPENENV_ADMIN_TOKEN>."},
                status_code=403,
            )
        if not manager.draining:
            task = asyncio.get_running_loop().create_task(drain(manager))
            _background.add(task)
            task.add_done_callback(_background.discard)
            supervisor = os.environ.get(SUPERVISOR_VARIABLE, "")
            if supervisor.isdigit() and int(supervisor) == os.getppid():
                os.kill(int(supervisor), DRAIN_SIGNAL)  # the other workers drain too
        return JSONResponse(
            {
                "status": "draining",
                "active_sessions": manager.active,
                "drain_timeout": manager.lifecycle.drain_timeout,
            },
            status_code=202,
        )


_background: set[asyncio.Task[None]] = set()


def start_local_drain(loop: asyncio.AbstractEventLoop) -> None:
    """Drain every app of this process that is not draining yet (from a signal handler)."""
    for manager in list(_managers):
        if not manager.draining:
            task = loop.create_task(drain(manager))
            _background.add(task)
            task.add_done_callback(_background.discard)
