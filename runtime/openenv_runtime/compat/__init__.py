"""The reference OpenEnv's ``openenv.core``, path for path, over this runtime.

``openenv.core.X`` is ``openenv_runtime.compat.X`` (``openenv.auto`` is
:mod:`openenv_runtime.auto`), so renaming the module prefix ports an environment; that is
what ``openenv migrate`` does. Every name is this runtime's own object (``EnvClient``,
``create_app``, ...) or a thin face over it; names whose machinery this runtime does not
carry import fine and say, when used, what to use instead.

:data:`REFERENCE_NAMES` is the one list of the reference's public names: the package face
below, ``compat.env_server``'s face and the tests all read it.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# Each public name of the reference's ``openenv.core`` (and ``openenv``'s top level) → the
# module of this package, at the reference's path, that exports it.
REFERENCE_NAMES: dict[str, str] = {
    **dict.fromkeys(["Action", "Observation", "State"], ".env_server.types"),
    **dict.fromkeys(
        [
            "BaseMessage",
            "CodeExecResult",
            "ConcurrencyConfig",
            "EnvironmentMetadata",
            "GetTaskRangeRequest",
            "GetTaskRequest",
            "HealthResponse",
            "HealthStatus",
            "ListTasksRequest",
            "NumTasksRequest",
            "SchemaResponse",
            "ServerCapacityStatus",
            "ServerMode",
            "SessionInfo",
            "WSCloseMessage",
            "WSErrorCode",
            "WSErrorResponse",
            "WSIncomingMessage",
            "WSObservationResponse",
            "WSResetMessage",
            "WSStateMessage",
            "WSStateResponse",
            "WSStepMessage",
        ],
        ".env_server.types",
    ),
    **dict.fromkeys(
        [
            "ConcurrencyConfigurationError",
            "EnvironmentFactoryError",
            "OpenEnvError",
            "SessionCapacityError",
            "SessionCreationError",
            "SessionNotFoundError",
        ],
        ".env_server.exceptions",
    ),
    **dict.fromkeys(
        ["Environment", "Message", "ModelTokenizer", "TaskProvider", "Transform"],
        ".env_server.interfaces",
    ),
    **dict.fromkeys(["CompositeTransform", "NullTransform"], ".env_server.base_transforms"),
    **dict.fromkeys(
        ["HTTPEnvServer", "create_app", "create_fastapi_app"], ".env_server.http_server"
    ),
    **dict.fromkeys(
        ["WebInterfaceManager", "create_web_interface_app", "load_environment_metadata"],
        ".env_server.web_interface",
    ),
    **dict.fromkeys(
        ["deserialize_action", "deserialize_action_with_preprocessing", "serialize_observation"],
        ".env_server.serialization",
    ),
    "GetEndpointConfig": ".env_server.route_config",
    **dict.fromkeys(
        [
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
        ],
        ".env_server.mcp_types",
    ),
    "MCPEnvironment": ".env_server.mcp_environment",  # needs the [mcp] extra
    "EnvClient": ".env_client",
    "SyncEnvClient": ".sync_client",
    **dict.fromkeys(["GenericAction", "GenericEnvClient"], ".generic_client"),
    **dict.fromkeys(["MCPClientBase", "MCPToolClient"], ".mcp_client"),
    **dict.fromkeys(
        [
            "AnthropicClient",
            "LLMClient",
            "LLMResponse",
            "OpenAIClient",
            "ToolCall",
            "create_llm_client",
        ],
        ".llm_client",
    ),
    "StepResult": ".client_types",
    **dict.fromkeys(
        [
            "ExponentialDiscountingTrajectoryRubric",
            "Gate",
            "LLMJudge",
            "Rubric",
            "RubricDict",
            "RubricList",
            "Sequential",
            "TrajectoryRubric",
            "WeightedSum",
        ],
        ".rubrics",
    ),
    # the reference's top-level ``openenv`` package: ``from openenv import AutoEnv``
    **dict.fromkeys(["AutoAction", "AutoEnv"], "..auto"),
}

__all__ = sorted(REFERENCE_NAMES)


def load(name: str, package: str, names: dict[str, str]) -> Any:
    """``name`` from its module in ``names`` (relative to ``package``), cached in the caller."""
    module = names.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(import_module(module, package), name)


def __getattr__(name: str) -> Any:
    value = load(name, __name__, REFERENCE_NAMES)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(REFERENCE_NAMES))
