"""Alias package of the reference's ``openenv.core.env_server``: the same names, from our runtime.

``from openenv.core.env_server import X`` becomes ``from openenv_runtime.env_server import X``
(or simply ``from openenv_runtime import X``).
"""

from __future__ import annotations

from typing import Any

from ..compat.exceptions import (
    ConcurrencyConfigurationError,
    EnvironmentFactoryError,
    OpenEnvError,
    SessionCapacityError,
    SessionCreationError,
    SessionNotFoundError,
)
from ..compat.interfaces import GetEndpointConfig, Message, ModelTokenizer, TaskProvider
from ..compat.serialization import (
    deserialize_action,
    deserialize_action_with_preprocessing,
    serialize_observation,
)
from ..compat.types import (
    BaseMessage,
    CodeExecResult,
    ConcurrencyConfig,
    EnvironmentMetadata,
    GetTaskRangeRequest,
    GetTaskRequest,
    HealthResponse,
    HealthStatus,
    ListTasksRequest,
    NumTasksRequest,
    SchemaResponse,
    ServerCapacityStatus,
    ServerMode,
    SessionInfo,
    WSCloseMessage,
    WSErrorCode,
    WSErrorResponse,
    WSIncomingMessage,
    WSObservationResponse,
    WSResetMessage,
    WSStateMessage,
    WSStateResponse,
    WSStepMessage,
)
from ..environment import Environment
from ..mcp.types import (
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
from ..models import Action, Observation, State
from ..server.app import create_app
from ..server.compat import (
    HTTPEnvServer,
    WebInterfaceManager,
    create_fastapi_app,
    create_web_interface_app,
)
from ..transforms import CompositeTransform, NullTransform, Transform

__all__ = [
    "RESERVED_TOOL_NAMES",
    "Action",
    "BaseMessage",
    "CallToolAction",
    "CallToolObservation",
    "CodeExecResult",
    "CompositeTransform",
    "ConcurrencyConfig",
    "ConcurrencyConfigurationError",
    "Environment",
    "EnvironmentFactoryError",
    "EnvironmentMetadata",
    "GetEndpointConfig",
    "GetTaskRangeRequest",
    "GetTaskRequest",
    "HTTPEnvServer",
    "HealthResponse",
    "HealthStatus",
    "JsonRpcError",
    "JsonRpcErrorCode",
    "JsonRpcRequest",
    "JsonRpcResponse",
    "ListTasksRequest",
    "ListToolsAction",
    "ListToolsObservation",
    "MCPEnvironment",
    "McpMethod",
    "Message",
    "ModelTokenizer",
    "NullTransform",
    "NumTasksRequest",
    "Observation",
    "OpenEnvError",
    "SchemaResponse",
    "ServerCapacityStatus",
    "ServerMode",
    "SessionCapacityError",
    "SessionCreationError",
    "SessionInfo",
    "SessionNotFoundError",
    "State",
    "TaskProvider",
    "Tool",
    "ToolError",
    "ToolErrorType",
    "Transform",
    "WSCloseMessage",
    "WSErrorCode",
    "WSErrorResponse",
    "WSIncomingMessage",
    "WSMCPMessage",
    "WSMCPResponse",
    "WSObservationResponse",
    "WSResetMessage",
    "WSStateMessage",
    "WSStateResponse",
    "WSStepMessage",
    "WebInterfaceManager",
    "create_app",
    "create_fastapi_app",
    "create_web_interface_app",
    "deserialize_action",
    "deserialize_action_with_preprocessing",
    "serialize_observation",
]


def __getattr__(name: str) -> Any:
    if name == "MCPEnvironment":  # needs the [mcp] extra: imported on first use
        from ..mcp.environment import MCPEnvironment

        return MCPEnvironment
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
