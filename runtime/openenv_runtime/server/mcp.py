"""MCP over the environment server: ``POST /mcp``, ``WS /mcp`` and ``mcp`` frames on ``/ws``.

JSON-RPC 2.0 with ``tools/list`` and ``tools/call``, plus OpenEnv's session methods
``openenv/session/create`` / ``openenv/session/close``: a session created so holds a slot
and an environment instance like an HTTP session (``POST /reset``), is named by
``params.session_id`` in later calls, and can be attached to a WebSocket with
``/ws?session_id=``. A call that names no session runs on a short-lived instance, as in
the reference; that instance holds a slot (and counts for the client) while it lives.

A session is reached only by its owner: the session a WebSocket carries from that socket
alone, an HTTP/MCP session by the secret id it was given at creation (never a WebSocket
session's id, which load balancers and resuming clients see). Every reply is bounded: an
error quotes the first validation errors and counts the rest, and no message echoes more
than :data:`MAX_ECHO` characters of what the client sent. Environments offer tools either by being an ``MCPEnvironment`` (or any
object with async ``list_tools`` / ``call_tool``), or by answering ``ListToolsAction`` /
``CallToolAction`` in ``step``.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from openenv_runtime.mcp.types import (
    SESSION_CLOSE,
    SESSION_CREATE,
    CallToolAction,
    CallToolObservation,
    JsonRpcErrorCode,
    JsonRpcRequest,
    JsonRpcResponse,
    ListToolsAction,
    ListToolsObservation,
    McpMethod,
)
from openenv_runtime.models import Observation
from openenv_runtime.protocol import (
    CLOSE_INTERNAL_ERROR,
    CLOSE_NORMAL,
    ErrorCode,
    decode,
    encode,
    error_message,
)
from openenv_runtime.server.guards.limits import client_identity, validation_errors
from openenv_runtime.server.metrics import (
    MCP_DONE,
    MCP_ERROR,
    MCP_INVALID,
    MCP_OK,
    MCP_TIMEOUT,
    Tally,
)
from openenv_runtime.server.running.adapter import Exhausted, StepTimeout
from openenv_runtime.server.sessions.registry import NoCapacity, Session, SessionManager
from openenv_runtime.server.stepping import Stepper, ToolCall
from openenv_runtime.server.ws.endpoint import (
    CLOSE_REPLY,
    FinalReply,
    WebSocketEndpoint,
    describe_exception,
)

logger = logging.getLogger("openenv_runtime.server")

Reply = dict[str, Any]

MAX_ECHO = 200
"""Characters of a client's own input (a method name, an id) quoted back in an error."""
MAX_MESSAGE = 2000
"""Characters of an error message (an environment's exception text included)."""
MAX_REQUEST_KEYS = 8
"""Keys a JSON-RPC request may have (it needs four); more is refused before validating."""


def clip(value: Any, limit: int = MAX_ECHO) -> str:
    """``value`` as text of at most ``limit`` characters (marked when cut)."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _error(code: JsonRpcErrorCode, message: str, request_id: Any = None, data: Any = None) -> Reply:
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None
    elif isinstance(request_id, str) and len(request_id) > MAX_ECHO:
        request_id = None  # an id longer than any client needs is not echoed
    return JsonRpcResponse.error_response(
        code, clip(message, MAX_MESSAGE), data, request_id
    ).model_dump()


def _ok(result: Any, request_id: Any) -> Reply:
    return JsonRpcResponse.success(result, request_id).model_dump()


def _built(action: Any) -> Any:
    """The action of an MCP tool step as is: the handler built it (``CallToolAction``, ...)."""
    return action


class MCPHandler:
    """Answers JSON-RPC requests for one app, on a session's environment or a short-lived one.
    A tool answered by ``step()`` is run by the server's one step function (``stepping.py``),
    counted under ``transport="mcp"`` in ``tally`` (``None``: not counted)."""

    def __init__(
        self, manager: SessionManager, auth_required: bool = False, tally: Tally | None = None
    ) -> None:
        self.manager = manager
        self.runner = manager.runner
        self.auth_required = auth_required
        runner = manager.runner
        self.steps = Stepper(
            runner,
            _built,
            0,  # never a dict: the field-count bound does not apply
            tally,
            (MCP_OK, MCP_DONE, MCP_INVALID, MCP_ERROR, MCP_TIMEOUT),
            bind=partial(runner.bind_step, tools=True),
        )

    def client(self, scope: Any) -> str:
        """Who a request counts as for ``MAX_SESSIONS_PER_CLIENT`` (as for ``POST /reset``)."""
        return client_identity(scope, self.auth_required)

    async def open_session(self, client: str | None = None) -> Session | Reply:
        session = self.manager.open("http", client)
        if session is None:
            refused = self.manager.refusal(client)
            return _error(JsonRpcErrorCode.SERVER_ERROR, refused.message, data=refused.details)
        try:
            session.env = await self.manager.new_instance()
            await self.manager.hold_tools(session)
        except StepTimeout as exc:
            session.env = None  # abandoned: the runner closes it when its constructor returns
            await self.manager.release(session)
            return _error(JsonRpcErrorCode.SERVER_ERROR, str(exc))
        except Exception as exc:
            await self.manager.release(session)  # the slot, the instance: nothing leaks
            return _error(JsonRpcErrorCode.SERVER_ERROR, describe_exception(exc))
        return session

    async def handle(
        self, payload: Any, current: Session | None = None, client: str | None = None
    ) -> Reply:
        """Answer one JSON-RPC request. ``current`` is the session of the socket it came on."""
        if isinstance(payload, dict) and len(payload) > MAX_REQUEST_KEYS:
            return _error(
                JsonRpcErrorCode.INVALID_REQUEST,
                f"Invalid request: {len(payload)} keys; a JSON-RPC request has jsonrpc, method, "
                "params and id.",
                payload.get("id"),
            )
        try:
            request = JsonRpcRequest.model_validate(payload)
        except ValidationError as exc:
            errors, total = validation_errors(exc)
            request_id = payload.get("id") if isinstance(payload, dict) else None
            return _error(
                JsonRpcErrorCode.INVALID_REQUEST,
                "Invalid request: see data.errors",
                request_id,
                {"errors": errors, "error_count": total},
            )
        rid, params = request.id, request.params
        if request.method == SESSION_CREATE:
            if current is not None:
                return _ok({"session_id": current.id}, rid)
            opened = await self.open_session(client)
            if isinstance(opened, dict):
                return {**opened, "id": rid}
            return _ok({"session_id": opened.id}, rid)
        if request.method == SESSION_CLOSE:
            return await self._close(params.get("session_id"), current, rid)
        if request.method not in (McpMethod.TOOLS_LIST.value, McpMethod.TOOLS_CALL.value):
            return _error(
                JsonRpcErrorCode.METHOD_NOT_FOUND, f"Method not found: {clip(request.method)}", rid
            )
        if request.method == McpMethod.TOOLS_CALL.value and not params.get("name"):
            return _error(
                JsonRpcErrorCode.INVALID_PARAMS, "params.name (the tool) is required", rid
            )
        session = current
        named = params.get("session_id")
        if session is None and named:
            session = self.owned(named)
            if session is None:
                return _error(
                    JsonRpcErrorCode.INVALID_PARAMS, f"Unknown session_id: {clip(named, 16)}", rid
                )
        if session is not None:
            return await self._on_session(session, request.method, params, rid)
        try:
            async with self.manager.borrow(client) as env:
                return await self._tools(env, request.method, params, rid)
        except NoCapacity as refused:
            return _error(JsonRpcErrorCode.SERVER_ERROR, refused.message, rid, refused.details)
        except (StepTimeout, Exhausted) as exc:
            return _error(JsonRpcErrorCode.SERVER_ERROR, str(exc), rid)
        except Exception as exc:
            return _error(JsonRpcErrorCode.SERVER_ERROR, describe_exception(exc), rid)

    def owned(self, named: Any) -> Session | None:
        """The HTTP/MCP session whose secret id is ``named`` (a WebSocket's session: never)."""
        session = self.manager.sessions.get(named) if isinstance(named, str) else None
        if session is None or session.kind != "http" or session.env is None:
            return None
        return session

    async def _on_session(self, session: Session, method: str, params: Any, rid: Any) -> Reply:
        session.busy = True
        session.stepped = True
        try:
            return await self._tools(session.env, method, params, rid)
        except StepTimeout as exc:
            logger.error("session %s ended: %s", session.label, exc)
            self.manager.abandoned += 1
            session.env = None  # abandoned: the runner closes it when its call returns
            self.manager.release_soon(session)
            return _error(JsonRpcErrorCode.SERVER_ERROR, str(exc), rid)
        finally:
            session.busy = False
            session.last_active = time.monotonic()

    async def _close(self, target: Any, current: Session | None, rid: Any) -> Reply:
        if not target:
            return _error(JsonRpcErrorCode.INVALID_PARAMS, "params.session_id is required", rid)
        if current is not None and target == current.id:
            return _error(
                JsonRpcErrorCode.INVALID_REQUEST,
                "This WebSocket's own session ends when the socket closes; send a close message.",
                rid,
            )
        session = self.owned(target)
        if session is None:
            return _error(
                JsonRpcErrorCode.INVALID_PARAMS, f"Unknown session_id: {clip(target, 16)}", rid
            )
        await self.manager.release(session)
        return _ok({"session_id": session.id, "closed": True}, rid)

    async def _tools(self, env: Any, method: str, params: dict[str, Any], rid: Any) -> Reply:
        try:
            if method == McpMethod.TOOLS_LIST.value:
                return _ok({"tools": await self._list(env)}, rid)
            return _ok(await self._call(env, params), rid)
        except _NoTools:
            return _error(
                JsonRpcErrorCode.INTERNAL_ERROR,
                "This environment offers no MCP tools (it is not an MCPEnvironment).",
                rid,
            )
        except StepTimeout:
            raise
        except Exception as exc:
            logger.info("MCP %s failed: %s", method, clip(str(exc), MAX_MESSAGE))
            return _error(JsonRpcErrorCode.INTERNAL_ERROR, describe_exception(exc), rid)

    async def _list(self, env: Any) -> list[dict[str, Any]]:
        if callable(getattr(env, "list_tools", None)):
            tools = await self.runner.bounded(env, env.list_tools)
        else:
            obs = await self._step(env, ListToolsAction())
            if not isinstance(obs, ListToolsObservation):
                raise _NoTools
            tools = obs.tools
        return [
            {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
            for t in tools
        ]

    async def _call(self, env: Any, params: dict[str, Any]) -> Any:
        from openenv_runtime.mcp.environment import tool_result_payload

        name, arguments = str(params["name"]), params.get("arguments") or {}
        if callable(getattr(env, "call_tool", None)):
            result = await self.runner.bounded(env, env.call_tool, name, arguments)
            return tool_result_payload(result)
        obs = await self._step(env, CallToolAction(tool_name=name, arguments=arguments))
        if not isinstance(obs, CallToolObservation):
            raise _NoTools
        if obs.error is not None:
            raise RuntimeError(f"{obs.error.error_type.value}: {obs.error.message}")
        return obs.result

    async def _step(self, env: Any, action: Any) -> Any:
        try:
            obs = self.steps.run(ToolCall(env), action)
            if not isinstance(obs, Observation):
                obs = await obs
        except (ValidationError, TypeError, ValueError, AttributeError):
            raise _NoTools from None
        return obs


class _NoTools(Exception):
    pass


def build_mcp_router(handler: MCPHandler) -> APIRouter:
    router = APIRouter(tags=["MCP"])

    @router.post("/mcp", summary="Model Context Protocol (JSON-RPC 2.0): tools/list, tools/call")
    async def mcp_http(request: Request) -> Reply:
        try:
            payload = decode(await request.body())
        except ValueError:
            return _error(JsonRpcErrorCode.PARSE_ERROR, "Parse error: the body is not JSON")
        return await handler.handle(payload, client=handler.client(request.scope))

    @router.websocket("/mcp")
    async def mcp_ws(websocket: WebSocket) -> None:
        await websocket.accept()
        opened = await handler.open_session(handler.client(websocket.scope))
        if isinstance(opened, dict):
            await websocket.send_text(encode(opened))
            await websocket.close()
            return
        try:
            while True:
                try:
                    frame = await websocket.receive_text()
                except WebSocketDisconnect:
                    return
                try:
                    payload = decode(frame)
                except ValueError:
                    reply = _error(
                        JsonRpcErrorCode.PARSE_ERROR, "Parse error: the frame is not JSON"
                    )
                else:
                    reply = await handler.handle(payload, current=opened)
                    if opened.released:  # a tool call overran the step timeout
                        await websocket.send_text(encode(reply))
                        await websocket.close(CLOSE_INTERNAL_ERROR)
                        return
                await websocket.send_text(encode(reply))
        finally:
            await handler.manager.release(opened)

    return router


async def serve_attached(
    endpoint: WebSocketEndpoint, scope: dict[str, Any], receive: Any, send: Any
) -> None:
    """``/ws?session_id=``: a WebSocket on a session opened over HTTP; the session outlives it."""
    from urllib.parse import parse_qs

    wanted = (parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_id") or [""])[
        0
    ]
    session = endpoint.manager.sessions.get(wanted)
    await send({"type": "websocket.accept"})
    if session is None or session.kind != "http" or session.env is None or session.lock is None:
        text = f"Unknown session_id: {wanted}; open one with POST /reset or openenv/session/create."
        await send({"type": "websocket.send", "text": error_message(ErrorCode.SESSION_ERROR, text)})
        await send({"type": "websocket.close", "code": CLOSE_NORMAL})
        return
    try:
        while True:
            message = await receive()
            if message["type"] != "websocket.receive" or session.released:
                return
            frame = message.get("text") or message.get("bytes") or b""
            async with session.lock:  # HTTP calls on the same session wait their turn
                reply = await endpoint.answer_frame(session, frame)
            if reply is CLOSE_REPLY:
                await send({"type": "websocket.close", "code": CLOSE_NORMAL})
                return
            if not isinstance(reply, str):  # any other sentinel (a drain): end this socket
                await send({"type": "websocket.close", "code": CLOSE_NORMAL})
                return
            await send({"type": "websocket.send", "text": reply})
            if type(reply) is FinalReply:
                await endpoint.manager.release(session)
                await send({"type": "websocket.close", "code": CLOSE_INTERNAL_ERROR})
                return
    except OSError:
        pass
