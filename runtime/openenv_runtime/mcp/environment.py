"""``MCPEnvironment``: an environment whose actions are calls of FastMCP tools.

Declare tools on a ``fastmcp.FastMCP`` server and hand it to the base class::

    from fastmcp import FastMCP

    class EchoEnvironment(MCPEnvironment):
        def __init__(self) -> None:
            mcp = FastMCP("echo")

            @mcp.tool
            def echo(message: str) -> str:
                return message

            super().__init__(mcp)

        def reset(self, seed=None, episode_id=None, **kwargs) -> Observation: ...

        @property
        def state(self) -> State: ...

``step(ListToolsAction())`` lists the tools, ``step(CallToolAction(...))`` calls one (30 s
limit unless ``timeout_s`` says otherwise); any other action goes to ``_step_impl``. The
server also offers the tools over ``POST /mcp``, ``WS /mcp`` and ``mcp`` frames on ``/ws``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from pydantic_core import to_jsonable_python

from ..environment import Environment
from ..models import Action, Observation, State
from .types import (
    RESERVED_TOOL_NAMES,
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
    ToolError,
    ToolErrorType,
)

T = TypeVar("T")

TOOL_CALL_TIMEOUT_S = 30.0


def _fastmcp() -> Any:
    try:
        import fastmcp
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            'MCPEnvironment needs FastMCP: pip install "openenv-runtime[mcp]"'
        ) from None
    return fastmcp


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from plain code, even when this thread runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # handed back to the caller below
            box["error"] = exc

    thread = threading.Thread(target=target, name="openenv-mcp-call")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def tool_result_payload(result: Any) -> Any:
    """A FastMCP call result as plain JSON (``content``, ``structured_content``, ``data``, ...)."""
    if isinstance(result, dict | list | str | int | float | bool) or result is None:
        return result
    fields = ("content", "structured_content", "meta", "data", "is_error")
    if all(hasattr(result, f) for f in fields):
        return {f: to_jsonable_python(getattr(result, f), fallback=str) for f in fields}
    return to_jsonable_python(result, fallback=str)


def _input_schema(tool: Any) -> dict[str, Any]:
    # The MCP SDK renamed inputSchema to input_schema; read whichever field this version has.
    fields = getattr(type(tool), "model_fields", {})
    name = "input_schema" if "input_schema" in fields else "inputSchema"
    return dict(getattr(tool, name, None) or {})


class MCPEnvironment(Environment[Action, Observation, State]):
    """Base class of tool environments; see the module docstring."""

    def __init__(self, mcp_server: Any, transform: Any = None, rubric: Any = None) -> None:
        super().__init__(transform=transform, rubric=rubric)
        self.mcp_server = mcp_server
        self.mcp_client = _fastmcp().Client(mcp_server)
        reserved = sorted(RESERVED_TOOL_NAMES & {t.name for t in run_blocking(self._raw_tools())})
        if reserved:
            raise ValueError(
                f"tool names {reserved} are reserved for the environment protocol "
                f"({', '.join(sorted(RESERVED_TOOL_NAMES))}); rename those tools."
            )

    async def _raw_tools(self) -> list[Any]:
        async with _fastmcp().Client(self.mcp_server) as client:
            return list(await client.list_tools())

    async def list_tools(self) -> list[Tool]:
        """The tools on offer, with their argument schemas."""
        return [
            Tool(name=t.name, description=t.description or "", input_schema=_input_schema(t))
            for t in await self._raw_tools()
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], timeout_s: float | None = None
    ) -> Any:
        """Call tool ``name``; returns FastMCP's result (raises on a tool error or timeout)."""

        async def call() -> Any:
            async with _fastmcp().Client(self.mcp_server) as client:
                return await client.call_tool(name, arguments)

        return await asyncio.wait_for(call(), timeout_s or TOOL_CALL_TIMEOUT_S)

    async def _observe_call(
        self, action: CallToolAction, timeout_s: float | None
    ) -> CallToolObservation:
        name = action.tool_name
        try:
            result = await self.call_tool(name, action.arguments, timeout_s)
        except asyncio.TimeoutError:
            limit = timeout_s or TOOL_CALL_TIMEOUT_S
            error = ToolError(
                error_type=ToolErrorType.TIMEOUT, message=f"{name} took over {limit}s"
            )
            return CallToolObservation(tool_name=name, error=error)
        except Exception as exc:
            text = str(exc) or type(exc).__name__
            kind = (
                ToolErrorType.TOOL_NOT_FOUND
                if "unknown tool" in text.lower() or "not found" in text.lower()
                else ToolErrorType.EXECUTION_ERROR
            )
            return CallToolObservation(
                tool_name=name, error=ToolError(error_type=kind, message=text)
            )
        return CallToolObservation(tool_name=name, result=tool_result_payload(result))

    async def step_async(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=await self.list_tools())
        if isinstance(action, CallToolAction):
            return await self._observe_call(action, timeout_s)
        return await asyncio.to_thread(self._step_impl, action, timeout_s=timeout_s, **kwargs)

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        if isinstance(action, ListToolsAction | CallToolAction):
            return run_blocking(self.step_async(action, timeout_s=timeout_s))
        return self._step_impl(action, timeout_s=timeout_s, **kwargs)

    def _step_impl(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        """Handle an action that is not a tool call; override to accept your own actions."""
        raise ValueError(
            f"{type(self).__name__} takes ListToolsAction and CallToolAction; to accept "
            f"{type(action).__name__}, override `_step_impl`."
        )

    def close(self) -> None:
        self.mcp_client = None
        self.mcp_server = None
