"""Checkpoint and restore of sessions: the ``/ws`` messages, the handshake and HTTP routes.

See :mod:`openenv_runtime.server.sessions.checkpoints` for the store and docs/protocol.md (checkpoint, restore and fork)
for the wire format.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from functools import partial
from typing import Any, Literal

from fastapi import APIRouter, Body, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from openenv_runtime.protocol import CLOSE_INTERNAL_ERROR, encode
from openenv_runtime.server.guards.limits import client_identity
from openenv_runtime.server.sessions.checkpoints import Blob, CheckpointError, CheckpointStore
from openenv_runtime.server.sessions.registry import Session, SessionManager

logger = logging.getLogger("openenv_runtime.server")

HEADER_RESTORE = b"x-openenv-restore"
HEADER_RESTORE_DIGEST = b"x-openenv-restore-digest"


def supports_checkpoint(env: Any) -> bool:
    return getattr(type(env), "SUPPORTS_CHECKPOINT", False) is True


def unsupported(env: Any) -> CheckpointError:
    name = type(env).__qualname__
    return CheckpointError(
        "CHECKPOINT_UNSUPPORTED",
        f"{name} does not support checkpoints: set SUPPORTS_CHECKPOINT = True on the class and "
        "implement export_state() (returning JSON data or bytes) and import_state(state).",
        501,
    )


class Checkpointer:
    """Takes and restores the checkpoints of one server's sessions."""

    def __init__(self, manager: SessionManager, store: CheckpointStore) -> None:
        self.manager = manager
        self.runner = manager.runner
        self.store = store

    async def _call(self, env: Any, name: str, *args: Any) -> Any:
        func = getattr(env, name)
        if inspect.iscoroutinefunction(func):
            return await func(*args)
        pool = self.runner.pool_for(env)  # the session's own thread, when it has one
        return await asyncio.get_running_loop().run_in_executor(pool, partial(func, *args))

    async def take(self, session: Session) -> dict[str, Any]:
        """Checkpoint the session's environment; returns ``id``, ``step``, ``digest``, ``size``."""
        env = session.env
        if env is None:
            raise CheckpointError("SESSION_ERROR", "This session has no environment any more.")
        if not supports_checkpoint(env):
            raise unsupported(env)
        state = await self._call(env, "export_state")
        step = (await self.runner.state(env)).step_count
        blob = self.store.encode(state, step, session.episode_open, session.client)
        info: dict[str, Any] = (await self.store.put(blob)).info
        tally = self.manager.tally
        tally.checkpoints["taken",] += 1
        tally.checkpoint_bytes += int(info.get("size") or 0)
        return info

    async def restore(self, session: Session, ident: Any, digest: Any) -> dict[str, Any]:
        """Load checkpoint ``ident`` into the session's environment (verified first)."""
        env = session.env
        if env is None:
            raise CheckpointError("SESSION_ERROR", "This session has no environment any more.")
        if not supports_checkpoint(env):
            raise unsupported(env)
        blob = await self.store.get(ident, digest)
        await self.apply(session, blob)
        return blob.info

    async def apply(self, session: Session, blob: Blob) -> None:
        await self._call(session.env, "import_state", blob.state())
        session.episode_open = blob.header.get("episode_open")
        self.manager.tally.checkpoints["restored",] += 1

    # -- /ws -------------------------------------------------------------------------------
    async def handle(self, session: Session, kind: str, data: Any) -> str:
        """The reply frame of a ``checkpoint`` or ``restore`` message."""
        try:
            if kind == "checkpoint":
                info = await self.take(session)
            else:
                if not isinstance(data, dict):
                    raise CheckpointError(
                        "VALIDATION_ERROR",
                        'restore needs data {"id": ..., "digest": ...} (digest optional).',
                    )
                info = await self.restore(session, data.get("id"), data.get("digest"))
        except CheckpointError as exc:
            return exc.frame()
        return encode({"type": kind, "data": info})

    async def from_handshake(
        self, scope: dict[str, Any], send: Any
    ) -> Blob | Literal[False] | None:
        """The checkpoint a new connection asks to start from (``X-OpenEnv-Restore``).

        None: it asks for none. False: it was refused (HTTP error sent, no session started).
        """
        ident = digest = None
        for name, value in scope.get("headers", ()):
            if name == HEADER_RESTORE:
                ident = value.decode("latin-1")
            elif name == HEADER_RESTORE_DIGEST:
                digest = value.decode("latin-1")
        if ident is None:
            return None
        try:
            return await self.store.get(ident, digest)
        except CheckpointError as exc:
            from openenv_runtime.server.sessions.resume import refuse_handshake

            # debug only: the message names the checkpoint, and whoever knows its id may use it
            logger.debug("a session from checkpoint refused: %s", exc.message)
            await refuse_handshake(scope, send, exc.status, exc.code, exc.message, 1008)
            return False

    async def start_from(self, session: Session, blob: Blob, send: Any) -> bool:
        """Restore a just-opened session; on failure tell the client, end it, return False."""
        try:
            if not supports_checkpoint(session.env):
                raise unsupported(session.env)
            await self.apply(session, blob)
            return True
        except Exception as exc:
            message = exc.frame() if isinstance(exc, CheckpointError) else _env_error(exc)
            logger.warning("restoring a new session failed: %s", exc)
            try:
                await send({"type": "websocket.send", "text": message})
                await send(
                    {
                        "type": "websocket.close",
                        "code": CLOSE_INTERNAL_ERROR,
                        "reason": "restore failed",
                    }
                )
            except OSError:
                pass
            await self.manager.release(session)
            return False


def _env_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return encode(
        {"type": "error", "data": {"code": "EXECUTION_ERROR", "message": f"import_state: {text}"}}
    )


# -- HTTP ----------------------------------------------------------------------------------
class CheckpointRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session_id: str | None = Field(None, description="The HTTP session to checkpoint.")


class RestoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(description="The checkpoint's id.")
    digest: str | None = Field(None, description="Refuse unless the checkpoint has this digest.")
    session_id: str | None = Field(
        None, description="Restore into this HTTP session; without it a new session starts."
    )


def build_checkpoint_router(checkpointer: Checkpointer, auth_required: bool) -> APIRouter:
    """``POST /checkpoint`` and ``POST /restore`` for HTTP sessions."""
    router = APIRouter(tags=["checkpoints"])
    manager = checkpointer.manager

    def error(exc: CheckpointError) -> JSONResponse:
        return JSONResponse({"detail": exc.message, "code": exc.code}, status_code=exc.status)

    def lookup(session_id: str | None) -> Session:
        session = manager.sessions.get(session_id or "")
        if session is None or session.kind != "http" or session.lock is None:
            raise CheckpointError(
                "SESSION_ERROR",
                "No such HTTP session: POST /reset opens one (pass its session_id).",
                404,
            )
        return session

    async def locked(session: Session, job: Any) -> dict[str, Any]:
        assert session.lock is not None
        async with session.lock:
            if session.released:
                raise CheckpointError("SESSION_ERROR", "The session expired meanwhile.", 404)
            session.busy = True
            try:
                result: dict[str, Any] = await job()
                return result
            finally:
                session.busy = False
                session.last_active = time.monotonic()

    @router.post("/checkpoint", summary="Checkpoint an HTTP session's environment")
    async def checkpoint(
        request: CheckpointRequest | None = Body(default=None),
        x_session_id: str | None = Header(default=None),
        query_session: str | None = Query(default=None, alias="session_id"),
    ) -> Any:
        try:
            session = lookup(
                (request.session_id if request else None) or query_session or x_session_id
            )
            info = await locked(session, lambda: checkpointer.take(session))
        except CheckpointError as exc:
            return error(exc)
        return {**info, "session_id": session.id}

    @router.post("/restore", summary="Restore a checkpoint into an HTTP session, or a new one")
    async def restore(http: Request, request: RestoreRequest) -> Any:
        try:
            if request.session_id:
                session = lookup(request.session_id)
                info = await locked(
                    session, lambda: checkpointer.restore(session, request.id, request.digest)
                )
                return {**info, "session_id": session.id}
            blob = await checkpointer.store.get(request.id, request.digest)  # before any session
        except CheckpointError as exc:
            return error(exc)
        client = client_identity(http.scope, auth_required)
        opened = manager.open("http", client)
        if opened is None:
            return JSONResponse(
                {
                    "detail": "Server is at capacity, draining, or this client holds its most "
                    "sessions (MAX_SESSIONS_PER_CLIENT); retry later.",
                    "code": "CAPACITY_REACHED",
                },
                status_code=503,
            )
        try:
            opened.env = await manager.new_instance()
            await manager.hold_tools(opened)
            if not supports_checkpoint(opened.env):
                raise unsupported(opened.env)
            await checkpointer.apply(opened, blob)
        except CheckpointError as exc:
            await manager.release(opened)
            return error(exc)
        except Exception as exc:
            logger.exception("restoring a new HTTP session failed")
            await manager.release(opened)
            return JSONResponse(
                {"detail": f"{type(exc).__name__}: {exc}", "code": "EXECUTION_ERROR"},
                status_code=500,
            )
        return JSONResponse(
            {**blob.info, "session_id": opened.id}, headers={"X-Session-Id": opened.id}
        )

    return router
