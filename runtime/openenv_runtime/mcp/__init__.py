"""MCP tool environments: typed tool actions, JSON-RPC messages and ``MCPEnvironment``.

The types need nothing beyond pydantic. ``MCPEnvironment`` declares its tools with
FastMCP (the library the reference uses, so its environments port unchanged) and needs
the extra: ``pip install "openenv-runtime[mcp]"``.
"""

from __future__ import annotations

from typing import Any

from .types import (
    RESERVED_TOOL_NAMES,
    CallToolAction,
    CallToolObservation,
    JsonRpcError,
    JsonRpcErrorCode,
    JsonRpcRequest,
    JsonRpcResponse,
    ListToolsAction,
    ListToolsObservation,
    McpMethod,
    Tool,
    ToolError,
    ToolErrorType,
    WSMCPMessage,
    WSMCPResponse,
)

__all__ = [
    "RESERVED_TOOL_NAMES",
    "CallToolAction",
    "CallToolObservation",
    "JsonRpcError",
    "JsonRpcErrorCode",
    "JsonRpcRequest",
    "JsonRpcResponse",
    "ListToolsAction",
    "ListToolsObservation",
    "MCPEnvironment",
    "McpMethod",
    "Tool",
    "ToolError",
    "ToolErrorType",
    "WSMCPMessage",
    "WSMCPResponse",
]


def __getattr__(name: str) -> Any:
    if name == "MCPEnvironment":
        from .environment import MCPEnvironment

        return MCPEnvironment
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
