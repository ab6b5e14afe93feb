"""HTTP ``/reset``, ``/step``, ``/state``, ``/close``: real sessions, never a throw-away environment.

``POST /reset`` opens an HTTP session (or resets the one it names) and returns its
``session_id``; ``/step``, ``/state`` and ``/close`` act on the session named by the
``session_id`` body field / query parameter or the ``X-Session-Id`` header. HTTP
sessions count against the same capacity as WebSocket ones and expire the same way (one
opened but never stepped sooner). The ``session_id`` is the session's only credential: 32
random bytes given to the client that opened it, never logged (access logs print
``session_id=[redacted]``); a WebSocket session's id never reaches an HTTP session.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from time import perf_counter
from typing import Any

from fastapi import APIRouter, Body, Header, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import from_json

from openenv_runtime.observability.tracing import TRACEPARENT, SessionSpan, context_from, failed
from openenv_runtime.protocol import ErrorCode, observation_payload
from openenv_runtime.server.guards.limits import client_identity
from openenv_runtime.server.running.adapter import ContractViolation, Exhausted, StepTimeout
from openenv_runtime.server.sessions.registry import Session, SessionManager
from openenv_runtime.server.ws.endpoint import describe_exception
from openenv_runtime.server.ws.handshake import RETRY_AFTER_SECONDS

logger = logging.getLogger("openenv_runtime.server")

SESSION_HEADER = "X-Session-Id"


class ResetRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    seed: int | None = None
    episode_id: str | None = None
    session_id: str | None = Field(
        default=None, description="Reset this session instead of opening a new one."
    )


class StepRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    action: dict[str, Any] = Field(description="The action's fields.")
    session_id: str | None = Field(
        default=None, description="The session that POST /reset returned."
    )


class CloseRequest(BaseModel):
    session_id: str | None = None


class StepResponse(BaseModel):
    model_config = ConfigDict(extra="allow")  # "metadata" beside the observation when non-empty
    observation: dict[str, Any]
    reward: float | int | bool | None = None
    done: bool = False
    session_id: str


def error_response(status: int, code: ErrorCode, message: str, **extra: Any) -> JSONResponse:
    """The error reply; a 503 (full, draining, no environment to start now) is temporary and
    says when to retry (``Retry-After``), as the WebSocket handshake's refusal does."""
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else None
    return JSONResponse(
        {"detail": message, "code": code.value, **extra}, status_code=status, headers=headers
    )


_NO_SESSION = (
    "No session named: call POST /reset first and pass the session_id it returns "
    f"(body field `session_id`, query parameter, or header `{SESSION_HEADER}`), or use the WebSocket endpoint /ws."
)


def lookup_session(manager: SessionManager, session_id: str | None) -> Session | JSONResponse:
    """The HTTP session named ``session_id``, or the error response that says why not."""
    if not session_id:
        return error_response(400, ErrorCode.SESSION_ERROR, _NO_SESSION)
    session = manager.sessions.get(session_id)
    if session is None or session.kind != "http":
        return error_response(
            404,
            ErrorCode.SESSION_ERROR,
            "This session does not exist or has expired; call POST /reset to open a new one.",
        )
    return session


async def run_call(
    manager: SessionManager, session: Session, call: Any, what: str, sent: str | None = None
) -> Any:
    """``await call()`` for one HTTP session: one request at a time, errors as responses.

    ``sent``: the request's ``traceparent``, for its span when tracing is on."""
    assert session.lock is not None
    async with session.lock:
        if session.released:
            return error_response(
                404,
                ErrorCode.SESSION_ERROR,
                "The session expired meanwhile; call POST /reset again.",
            )
        session.busy = True
        try:
            if manager.tracer is not None and (what == "reset" or what == "step"):
                return await traced_call(manager.tracer, session, call, what, sent)
            return await call()
        except StepTimeout as exc:
            logger.error("HTTP session %s ended: %s", session.label, exc)
            manager.abandoned += 1
            session.ended_by = "step_timeout"
            session.env = None  # abandoned: the runner closes it when its call returns
            await manager.release(session)
            return error_response(504, ErrorCode.STEP_TIMEOUT, str(exc))
        except ContractViolation as exc:
            logger.error("%s", exc)
            return error_response(500, ErrorCode.EXECUTION_ERROR, str(exc))
        except Exception as exc:
            # logged like the WebSocket's: the client gets one line, the log the traceback
            logger.exception("environment raised during HTTP %s", what)
            return error_response(500, ErrorCode.EXECUTION_ERROR, describe_exception(exc))
        finally:
            session.busy = False
            session.last_active = time.monotonic()


async def traced_call(tracer: Any, session: Session, call: Any, what: str, sent: str | None) -> Any:
    """``await call()`` inside the span of this reset or step of an HTTP session."""
    if session.trace is None:  # the session's span, parented to its first request's caller
        parent = context_from({TRACEPARENT: sent}) if sent else None
        session.trace = SessionSpan.start(tracer, session.label, "http", parent)
    with session.trace.request(tracer, what, sent) as span:
        start = perf_counter()
        try:
            result = await call()
        except Exception as exc:
            failed(
                span,
                (
                    ErrorCode.STEP_TIMEOUT
                    if isinstance(exc, StepTimeout)
                    else ErrorCode.EXECUTION_ERROR
                ).value,
            )
            raise
        finally:
            span.set_attribute("openenv.duration_ms", (perf_counter() - start) * 1000)
        payload = from_json(result) if type(result) is bytes else result
        if isinstance(payload, dict):
            done = bool(payload.get("done"))
            span.set_attribute("openenv.outcome", "done" if done else "ok")
            span.set_attribute("openenv.done", done)
            reward = payload.get("reward")
            if type(reward) is float or type(reward) is int:
                span.set_attribute("openenv.reward", float(reward))
        return result


def build_http_router(
    manager: SessionManager,
    answer_step: Callable[[Mapping[str, Any], dict[str, Any], str | None], Awaitable[Any]],
    auth_required: bool = False,
) -> APIRouter:
    """``/reset``, ``/step``, ``/state`` and ``/close``; ``answer_step`` answers a step
    (``http_step.HttpStep.answer``: the body, or the error response)."""
    router = APIRouter(tags=["HTTP sessions"])
    runner = manager.runner

    def lookup(session_id: str | None) -> Session | JSONResponse:
        return lookup_session(manager, session_id)

    async def run(session: Session, call: Any, what: str, sent: str | None = None) -> Any:
        return await run_call(manager, session, call, what, sent)

    @router.post("/reset", response_model=StepResponse, summary="Open (or reset) an HTTP session")
    async def reset(
        http: Request,
        request: ResetRequest | None = Body(default=None),
        x_session_id: str | None = Header(default=None),
        query_session: str | None = Query(default=None, alias="session_id"),
    ) -> Any:
        request = request or ResetRequest()
        session_id = request.session_id or query_session or x_session_id
        if session_id:
            found = lookup(session_id)
            if isinstance(found, JSONResponse):
                return found
            session = found
        else:
            client = client_identity(http.scope, auth_required)
            opened = manager.open("http", client)
            if opened is None:
                refused = manager.refusal(client)
                return error_response(
                    refused.status, ErrorCode.CAPACITY_REACHED, refused.message, **refused.details
                )
            session = opened
            try:
                session.env = await manager.new_instance()  # from the warm pool, if any
                await manager.hold_tools(session)
            except (StepTimeout, Exhausted) as exc:
                if isinstance(exc, StepTimeout):
                    session.env = None  # abandoned: closed when its constructor returns
                session.ended_by = "factory_error"
                await manager.release(session)
                return error_response(503, ErrorCode.FACTORY_ERROR, str(exc))
            except Exception as exc:
                logger.exception("creating the environment failed (HTTP /reset)")
                session.ended_by = "factory_error"
                await manager.release(session)
                return error_response(500, ErrorCode.FACTORY_ERROR, describe_exception(exc))
        options = request.model_dump(exclude={"session_id"}, exclude_none=True)

        async def call() -> Any:
            start = perf_counter()
            try:
                obs = await runner.reset(session.env, options)
            except Exception:
                manager.tally.reset("http", False, perf_counter() - start)
                raise
            manager.tally.reset("http", True, perf_counter() - start)
            return {**observation_payload(obs), "session_id": session.id}

        result = await run(session, call, "reset", http.headers.get(TRACEPARENT))
        if isinstance(result, JSONResponse):
            return result
        return JSONResponse(result, headers={SESSION_HEADER: session.id})

    @router.post(
        "/step", response_model=StepResponse, summary="Step the HTTP session that /reset opened"
    )
    async def step(
        http: Request,
        request: StepRequest,
        x_session_id: str | None = Header(default=None),
        query_session: str | None = Query(default=None, alias="session_id"),
    ) -> Any:
        # The request as the framework parsed it (the raw handler hands over what it does not
        # expect, and a mounted app's requests come this way); answered by the one handler.
        given = request.session_id or query_session or x_session_id
        reply = await answer_step(http.scope, request.action, given)
        if isinstance(reply, bytes):
            return Response(reply, media_type="application/json")
        return reply

    @router.get("/state", summary="State of the HTTP session that /reset opened")
    async def state(
        session_id: str | None = Query(default=None),
        x_session_id: str | None = Header(default=None),
    ) -> Any:
        found = lookup(session_id or x_session_id)
        if isinstance(found, JSONResponse):
            return found
        session = found

        async def call() -> Any:
            return (await runner.state(session.env)).model_dump(mode="json")

        return await run(session, call, "state")

    @router.post("/close", summary="End an HTTP session and free its slot")
    async def close(
        request: CloseRequest | None = Body(default=None),
        x_session_id: str | None = Header(default=None),
        query_session: str | None = Query(default=None, alias="session_id"),
    ) -> Any:
        found = lookup((request.session_id if request else None) or query_session or x_session_id)
        if isinstance(found, JSONResponse):
            return found
        assert found.lock is not None
        async with found.lock:
            await manager.release(found)
        return {"closed": found.id}

    return router
