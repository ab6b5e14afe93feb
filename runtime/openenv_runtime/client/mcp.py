"""``MCPToolClient``: list and call an environment's MCP tools over its WebSocket session.

Works against our server and the reference's alike. As in the reference, a tool call is
a step (``step(CallToolAction(...))``), so it counts in the episode (``state().step_count``,
rubrics, transforms) and shares the session's environment instance with ``reset``.
With ``use_production_mode = True`` calls go as JSON-RPC instead
(``{"type": "mcp", "data": ...}`` frames on ``/ws``), straight to the tools. A server whose
action class refuses tool steps is asked over JSON-RPC too::

    with MCPToolClient(base_url="http://127.0.0.1:8000") as env:
        env.reset()
        print([t.name for t in env.list_tools()])
        print(env.call_tool("echo_message", message="hi"))
"""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import ConfigDict

from ..errors import EnvError
from ..mcp.types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
    ToolError,
)
from ..models import Observation, State, StepResult
from ..protocol import encode
from .env_client import EnvClient


class GenericMCPObservation(Observation):
    """An observation of a tool environment that is neither a tool list nor a tool result."""

    model_config = ConfigDict(extra="allow")


def tool_from_payload(payload: dict[str, Any]) -> Tool:
    """A tool as listed on the wire (``inputSchema`` or ``input_schema``)."""
    return Tool(
        name=payload.get("name", ""),
        description=payload.get("description") or "",
        input_schema=payload.get("input_schema", payload.get("inputSchema")) or {},
    )


class MCPClientBase(EnvClient[CallToolAction, Observation, State]):
    """Shared part of MCP clients: JSON-RPC over the session, and tool-aware result parsing."""

    BLOCKING_EXTRA: tuple[str, ...] = ("list_tools", "call_tool", "get_tool", "has_tool")

    def __init__(self, base_url: str, **options: Any) -> None:
        mode = options.setdefault("mode", "production")
        if str(mode).lower() != "production":
            raise ValueError(
                f"{type(self).__name__} works in 'production' mode (tools), got {mode!r}; "
                "use GenericEnvClient for reset/step."
            )
        super().__init__(base_url, **options)
        self._tools_cache: list[Tool] | None = None
        self._rpc_ids = itertools.count(1)
        self.use_production_mode = False  # True: tools over JSON-RPC, not as steps

    async def _rpc(self, method: str, params: dict[str, Any] | None = None) -> Any:
        # getattr, not self.__dict__: reading an instance's __dict__ moves all its attributes
        # to CPython's slower path (see ReferenceClientMixin)
        ids = getattr(self, "_rpc_ids", None)
        if ids is None:  # a subclass whose __init__ did not reach ours
            ids = self._rpc_ids = itertools.count(1)
        request = {"jsonrpc": "2.0", "method": method, "params": params or {}, "id": next(ids)}
        reply = await self.request_frame('{"type":"mcp","data":' + encode(request) + "}")
        if reply.get("error"):
            error = reply["error"]
            raise EnvError(
                "MCP_ERROR", f"{method} failed: {error.get('message', error)}", dict(error)
            )
        return reply.get("result")

    def _step_payload(self, action: Any) -> dict[str, Any]:
        """The step data of a tool action (or any other action's fields)."""
        if isinstance(action, dict):
            return dict(action)
        return dict(action.model_dump(exclude={"metadata"} if not action.metadata else set()))

    def _parse_result(self, data: dict[str, Any]) -> StepResult[Any]:
        body = dict(data.get("observation") or {})
        reward, done = data.get("reward"), bool(data.get("done", False))
        common: dict[str, Any] = {
            "reward": reward,
            "done": done,
            "metadata": data.get("metadata", body.get("metadata") or {}),
        }
        observation: Observation
        if "tools" in body:
            tools = [tool_from_payload(t) for t in body.get("tools") or []]
            observation = ListToolsObservation(tools=tools, **common)
        elif "tool_name" in body:
            error = ToolError(**body["error"]) if body.get("error") else None
            observation = CallToolObservation(
                tool_name=body["tool_name"], result=body.get("result"), error=error, **common
            )
        else:
            body.update(common)
            observation = GenericMCPObservation.model_validate(body)
        return StepResult(
            observation=observation, reward=reward, done=done, metadata=data.get("metadata")
        )

    def _parse_state(self, data: dict[str, Any]) -> State:
        return State.model_validate(data)


class MCPToolClient(MCPClientBase):
    """Lists and calls tools; see the module docstring."""

    async def list_tools(self, use_cache: bool = True) -> list[Tool]:
        """The tools the environment offers (cached after the first call)."""
        cached = getattr(self, "_tools_cache", None)
        if use_cache and cached is not None:
            return list(cached)
        observation = None
        if not getattr(self, "use_production_mode", False):
            observation = await self._tool_step(ListToolsAction())
        if isinstance(observation, ListToolsObservation):
            tools = list(observation.tools)
        else:
            result = await self._rpc("tools/list") or {}
            tools = [tool_from_payload(t) for t in result.get("tools", [])]
        self._tools_cache = tools
        return list(tools)

    async def call_tool(self, name: str, **arguments: Any) -> Any:
        """Call tool ``name``; returns its value (FastMCP's ``data`` when present).

        A failed call raises :class:`EnvError` (a ``RuntimeError``) naming the tool.
        """
        observation = None
        if not getattr(self, "use_production_mode", False):
            observation = await self._tool_step(CallToolAction(tool_name=name, arguments=arguments))
        if isinstance(observation, CallToolObservation):
            if observation.error is not None:
                raise EnvError(
                    "TOOL_ERROR",
                    f"Tool {name!r} failed: {observation.error.message} "
                    f"({observation.error.error_type.value})",
                )
            result = observation.result
        else:
            result = await self._rpc("tools/call", {"name": name, "arguments": arguments})
        if isinstance(result, dict) and "data" in result:
            return result["data"]
        return getattr(result, "data", result)

    async def _tool_step(self, action: Any) -> Observation | None:
        """The observation of a tool step; None when the server's action class refuses it."""
        try:
            return (await self.step(action)).observation
        except EnvError as exc:
            if exc.code == "VALIDATION_ERROR":
                return None
            raise

    async def get_tool(self, name: str) -> Tool | None:
        return next((t for t in await self.list_tools() if t.name == name), None)

    async def has_tool(self, name: str) -> bool:
        return await self.get_tool(name) is not None
