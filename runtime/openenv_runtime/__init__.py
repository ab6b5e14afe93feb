"""openenv-runtime: serve an RL environment over the OpenEnv protocol, and talk to one.

Environment side::

    from openenv_runtime import Action, Observation, State, Environment, create_app

Client side::

    from openenv_runtime import EnvClient, EnvPool, StepResult, EnvError

Servers started for you: ``openenv_runtime.providers``.

Every public name of the reference OpenEnv's ``openenv.core`` is importable from here
too (loaded on first use), and its module paths have aliases
(``openenv_runtime.env_server.types``, ``openenv_runtime.client_types``, ...), so renaming
``openenv.core`` to ``openenv_runtime`` ports an environment. See "Coming from OpenEnv".
"""

from typing import Any

from ._version import __version__
from .client import DictObservation, EnvClient, GenericEnvClient, SyncEnvClient
from .client.checkpoint import Checkpoint
from .client.sync import SyncEnvPool
from .environment import Environment
from .errors import EnvError, EnvironmentContractError
from .models import Action, Observation, State, StepResult
from .pool import EnvPool
from .server import create_app

__all__ = [
    "Action",
    "Checkpoint",
    "DictObservation",
    "EnvClient",
    "EnvError",
    "EnvPool",
    "Environment",
    "EnvironmentContractError",
    "GenericEnvClient",
    "Observation",
    "State",
    "StepResult",
    "SyncEnvClient",
    "SyncEnvPool",
    "__version__",
    "create_app",
]

# Reference names, imported on first use: module path relative to this package.
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        [
            "BaseMessage",
            "CodeExecResult",
            "ConcurrencyConfig",
            "ConcurrencyConfigurationError",
            "EnvironmentFactoryError",
            "EnvironmentMetadata",
            "GetEndpointConfig",
            "GetTaskRangeRequest",
            "GetTaskRequest",
            "HTTPEnvServer",
            "HealthResponse",
            "HealthStatus",
            "ListTasksRequest",
            "Message",
            "ModelTokenizer",
            "NumTasksRequest",
            "OpenEnvError",
            "SchemaResponse",
            "ServerCapacityStatus",
            "ServerMode",
            "SessionCapacityError",
            "SessionCreationError",
            "SessionInfo",
            "SessionNotFoundError",
            "TaskProvider",
            "WSCloseMessage",
            "WSErrorCode",
            "WSErrorResponse",
            "WSIncomingMessage",
            "WSObservationResponse",
            "WSResetMessage",
            "WSStateMessage",
            "WSStateResponse",
            "WSStepMessage",
            "WebInterfaceManager",
            "create_fastapi_app",
            "create_web_interface_app",
            "deserialize_action",
            "deserialize_action_with_preprocessing",
            "serialize_observation",
        ],
        ".env_server",
    ),
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
            "MCPEnvironment",
            "McpMethod",
            "Tool",
            "ToolError",
            "ToolErrorType",
            "WSMCPMessage",
            "WSMCPResponse",
        ],
        ".mcp",
    ),
    **dict.fromkeys(["CompositeTransform", "NullTransform", "Transform"], ".transforms"),
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
    **dict.fromkeys(
        [
            "AnthropicClient",
            "LLMClient",
            "LLMResponse",
            "OpenAIClient",
            "ToolCall",
            "create_llm_client",
        ],
        ".llm",
    ),
    **dict.fromkeys(["GenericMCPObservation", "MCPClientBase", "MCPToolClient"], ".client.mcp"),
    "GenericAction": ".client.generic",
    "EnvConnectionError": ".errors",
    "load_environment_metadata": ".env_server.web_interface",
    "AutoEnv": ".auto",
    "AutoAction": ".auto",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
