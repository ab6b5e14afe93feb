"""The reference's ``openenv.core.env_server.types`` (rename the import, keep the names).

The message models are :mod:`openenv_runtime.wire`'s. The reference's HTTP request and
response models are defined here, for code that builds them: this server's own HTTP API
(:mod:`openenv_runtime.server.http.routes`) has models of the same names with a ``session_id``.
"""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ...models import Action, Observation, State
from ...wire import (
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
    Scalar,
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


class ResetRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    seed: int | None = Field(default=None, ge=0)
    episode_id: str | None = Field(default=None, max_length=255)


class ResetResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")
    observation: dict[str, Any]
    reward: float | None = None
    done: bool = False


class StepRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    action: dict[str, Any]
    timeout_s: float | None = Field(default=None, gt=0)
    request_id: str | None = Field(default=None, max_length=255)


class StepResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")
    observation: dict[str, Any]
    reward: float | None = None
    done: bool = False


__all__ = [
    "Action",
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
    "Observation",
    "ResetRequest",
    "ResetResponse",
    "Scalar",
    "SchemaResponse",
    "ServerCapacityStatus",
    "ServerMode",
    "SessionInfo",
    "State",
    "StepRequest",
    "StepResponse",
    "WSCloseMessage",
    "WSErrorCode",
    "WSErrorResponse",
    "WSIncomingMessage",
    "WSObservationResponse",
    "WSResetMessage",
    "WSStateMessage",
    "WSStateResponse",
    "WSStepMessage",
]
