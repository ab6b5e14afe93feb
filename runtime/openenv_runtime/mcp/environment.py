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

Tools may also be registered with ``@self.tool()`` (every mode) or
``@self.tool(mode="production" | "simulation")`` (only while ``self.mode`` is that mode;
see :mod:`openenv_runtime.mcp.modes`), and ``execute_code(code)`` runs an agent's Python
with the tools as plain functions (code mode; :mod:`openenv_runtime.mcp.code_mode`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from pydantic_core import to_jsonable_python

from ..blocking import run_to_completion
from ..environment import Environment
from ..models import Action, Observation, State
from .code_mode import CODE_TIMEOUT_S, run_code
from .modes import ModeTools, check_mode, check_tool_name
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


class ToolCallResult(dict[str, Any]):
    """A tool call's result as JSON (``content``, ``structured_content``, ``meta``, ``data``,
    ``is_error``) that also reads like FastMCP's ``CallToolResult``: ``result.data``."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def tool_result_payload(result: Any) -> Any:
    """A FastMCP call result as plain JSON (``content``, ``structured_content``, ``data``, ...)."""
    if isinstance(result, dict | list | str | int | float | bool) or result is None:
        return result
    fields = ("content", "structured_content", "meta", "data", "is_error")
    if all(hasattr(result, f) for f in fields):
        return ToolCallResult(
            {f: to_jsonable_python(getattr(result, f), fallback=str) for f in fields}
        )
    return to_jsonable_python(result, fallback=str)


def _input_schema(tool: Any) -> dict[str, Any]:
    # The MCP SDK renamed inputSchema to input_schema; read whichever field this version has.
    fields = getattr(type(tool), "model_fields", {})
    name = "input_schema" if "input_schema" in fields else "inputSchema"
    return dict(getattr(tool, name, None) or {})


class MCPEnvironment(Environment[Action, Observation, State]):
    """Base class of tool environments; see the module docstring."""

    code_client: str | None = None
    """Whose session holds this instance (set by the server): its code runs count against
    that client's share of code mode's worker slots."""

    def __init__(self, mcp_server: Any, transform: Any = None, rubric: Any = None) -> None:
        super().__init__(transform=transform, rubric=rubric)
        self.mcp_server = mcp_server
        self.mcp_client = _fastmcp().Client(mcp_server)
        self._held: tuple[Any, asyncio.AbstractEventLoop] | None = None
        self._code_session = object()  # whose code runs these are, for the slots' fair share
        self._mode_tools = ModeTools(_fastmcp(), getattr(mcp_server, "name", "tools"))
        reserved = sorted(
            RESERVED_TOOL_NAMES & {t.name for t in run_to_completion(self._raw_tools())}
        )
        if reserved:
            raise ValueError(
                f"tool names {reserved} are reserved for the environment protocol "
                f"({', '.join(sorted(RESERVED_TOOL_NAMES))}); rename those tools."
            )

    @property
    def mode(self) -> str | None:
        """``"production"``, ``"simulation"`` or None: which mode-specific tools are on offer."""
        return getattr(self, "_mode", None)

    @mode.setter
    def mode(self, value: str | None) -> None:
        check_mode(value)
        self._mode = value

    def tool(self, mode: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register the decorated function as a tool: in every mode, or only in ``mode``."""
        check_mode(mode)

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            check_tool_name(func.__name__)
            if mode is None:
                self.mcp_server.tool(func)
            else:
                self._mode_tools.register(mode, func)
            return func

        return register

    @asynccontextmanager
    async def mcp_session(self) -> AsyncIterator[Any]:
        """A connected FastMCP client of this environment's (every-mode) tools.

        While one is open (the server holds one for each session's lifetime), calls on the
        same event loop reuse its connection, so FastMCP's per-session state
        (``ctx.set_state``) lasts across tool calls; otherwise each call connects anew.
        """
        held = self._held_client()
        if held is not None:
            yield held
            return
        client = _fastmcp().Client(self.mcp_server)
        async with client:
            if getattr(self, "_held", None) is not None:  # held on another loop: leave it be
                yield client
                return
            self._held = (client, asyncio.get_running_loop())
            try:
                yield client
            finally:
                self._held = None

    def _held_client(self) -> Any | None:
        held = getattr(self, "_held", None)
        if held is None:
            return None
        client, loop = held
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return None
        return client if loop is running and client.is_connected() else None

    async def _raw_tools(self) -> list[Any]:
        async with self.mcp_session() as client:
            return list(await client.list_tools())

    async def _mode_raw_tools(self) -> list[Any]:
        server = self._mode_tools.servers.get(self.mode or "")
        if server is None:
            return []
        async with _fastmcp().Client(server) as client:
            return list(await client.list_tools())

    async def list_tools(self) -> list[Tool]:
        """The tools on offer in the current mode, with their argument schemas."""
        specific = await self._mode_raw_tools()
        names = {t.name for t in specific}
        every = [t for t in await self._raw_tools() if t.name not in names]
        return [
            Tool(name=t.name, description=t.description or "", input_schema=_input_schema(t))
            for t in every + specific
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], timeout_s: float | None = None
    ) -> Any:
        """Call tool ``name``; returns FastMCP's result (raises on a tool error or timeout)."""
        server = self._mode_tools.server_for(name, self.mode)
        if server is None:
            exists_elsewhere = self._mode_tools.unavailable(name, self.mode)
            if exists_elsewhere and name not in {t.name for t in await self._raw_tools()}:
                raise LookupError(f"Tool {name!r} is not available in {self.mode} mode")
            server = self.mcp_server

        async def call() -> Any:
            if server is self.mcp_server:
                async with self.mcp_session() as client:
                    return await client.call_tool(name, arguments)
            async with _fastmcp().Client(server) as client:
                return await client.call_tool(name, arguments)

        return await asyncio.wait_for(call(), timeout_s or TOOL_CALL_TIMEOUT_S)

    @property
    def supports_code_mode(self) -> bool:
        """True: ``execute_code`` runs agent code with the tools as functions."""
        return True

    def get_callables(self) -> dict[str, Callable[..., Any]]:
        """The current mode's tools as plain Python functions, by name (for code mode)."""

        async def functions() -> dict[str, Callable[..., Any]]:
            found = await self.mcp_server.list_tools()
            return {t.name: t.fn for t in found if callable(getattr(t, "fn", None))}

        return {**run_to_completion(functions()), **self._mode_tools.in_mode(self.mode)}

    def execute_code(self, code: str, timeout_s: float = CODE_TIMEOUT_S) -> Observation:
        """Run ``code`` with the tools as functions; the value of its ``result`` variable is in
        ``metadata["result"]``, a failure in ``metadata["error"]`` (and
        ``metadata["code"] == "CAPACITY_REACHED"`` when no worker slot came free in time)."""
        metadata = run_code(
            code,
            self.get_callables(),
            timeout_s,
            session=self._code_session,
            client=self.code_client,
        )
        return Observation(done=False, reward=0.0, metadata=metadata)

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
                if isinstance(exc, LookupError)
                or "unknown tool" in text.lower()
                or "not found" in text.lower()
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
            return run_to_completion(self.step_async(action, timeout_s=timeout_s))
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
        self._held = None
        self.mcp_client = None
        self.mcp_server = None
