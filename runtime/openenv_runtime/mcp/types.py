"""Tool actions and observations, and the JSON-RPC 2.0 messages of ``/mcp``."""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..models import Action, Observation

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
    "McpMethod",
    "Tool",
    "ToolError",
    "ToolErrorType",
    "WSMCPMessage",
    "WSMCPResponse",
]

# Tool names that would shadow the environment protocol's own messages.
RESERVED_TOOL_NAMES = frozenset({"reset", "step", "state", "close"})


class JsonRpcErrorCode(IntEnum):
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    SERVER_ERROR = -32000


_DEFAULT_MESSAGES = {
    JsonRpcErrorCode.PARSE_ERROR: "Parse error",
    JsonRpcErrorCode.INVALID_REQUEST: "Invalid Request",
    JsonRpcErrorCode.METHOD_NOT_FOUND: "Method not found",
    JsonRpcErrorCode.INVALID_PARAMS: "Invalid params",
    JsonRpcErrorCode.INTERNAL_ERROR: "Internal error",
    JsonRpcErrorCode.SERVER_ERROR: "Server error",
}


class McpMethod(str, Enum):
    TOOLS_LIST = "tools/list"
    TOOLS_CALL = "tools/call"


# OpenEnv's own JSON-RPC methods: a persistent MCP session over plain HTTP.
SESSION_CREATE = "openenv/session/create"
SESSION_CLOSE = "openenv/session/close"


class JsonRpcError(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: int
    message: str
    data: Any | None = None

    @classmethod
    def from_code(
        cls, code: JsonRpcErrorCode, message: str | None = None, data: Any = None
    ) -> JsonRpcError:
        return cls(code=int(code), message=message or _DEFAULT_MESSAGES[code], data=data)


class JsonRpcRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    jsonrpc: Literal["2.0"]
    method: str
    params: dict[str, Any] = Field(default_factory=dict)
    id: str | int | None = None


class JsonRpcResponse(BaseModel):
    """A reply: ``result`` or ``error``, never both (the dump leaves the other out)."""

    model_config = ConfigDict(extra="forbid")
    jsonrpc: Literal["2.0"] = "2.0"
    result: Any | None = None
    error: JsonRpcError | None = None
    id: str | int | None = None

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        data: dict[str, Any] = {"jsonrpc": self.jsonrpc, "id": self.id}
        if self.error is not None:
            data["error"] = self.error.model_dump()
        else:
            data["result"] = self.result
        return data

    def model_dump_json(self, **kwargs: Any) -> str:
        from pydantic_core import to_json

        return to_json(self.model_dump()).decode()

    @classmethod
    def success(cls, result: Any, request_id: str | int | None = None) -> JsonRpcResponse:
        return cls(result=result, id=request_id)

    @classmethod
    def error_response(
        cls,
        code: JsonRpcErrorCode,
        message: str | None = None,
        data: Any = None,
        request_id: str | int | None = None,
    ) -> JsonRpcResponse:
        return cls(error=JsonRpcError.from_code(code, message, data), id=request_id)


class Tool(BaseModel):
    """One tool as listed to agents: name, description, JSON schema of its arguments."""

    model_config = ConfigDict(extra="forbid")
    name: str
    description: str
    input_schema: dict[str, Any]


class ToolErrorType(str, Enum):
    EXECUTION_ERROR = "execution_error"
    INVALID_ARGS = "invalid_args"
    TRANSPORT_ERROR = "transport_error"
    TOOL_NOT_FOUND = "tool_not_found"
    TIMEOUT = "timeout"


class ToolError(BaseModel):
    """A failure around a tool call (an error the tool returns itself is its result)."""

    model_config = ConfigDict(extra="forbid")
    error_type: ToolErrorType
    message: str


class ListToolsAction(Action):
    """Ask for the tools on offer (works before ``reset``)."""

    type: Literal["list_tools"] = "list_tools"


class CallToolAction(Action):
    """Call tool ``tool_name`` with ``arguments``."""

    type: Literal["call_tool"] = "call_tool"
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ListToolsObservation(Observation):
    tools: list[Tool]


class CallToolObservation(Observation):
    tool_name: str
    result: Any = None
    error: ToolError | None = None


class WSMCPMessage(BaseModel):
    """``{"type": "mcp", "data": <JSON-RPC request>}`` on ``/ws``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    type: Literal["mcp"] = "mcp"
    data: dict[str, Any]


class WSMCPResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: str = "mcp"
    data: dict[str, Any]
