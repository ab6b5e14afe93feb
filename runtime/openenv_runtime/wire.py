"""Pydantic models of the reference's wire messages and server bookkeeping.

Field names and types follow the reference protocol (they are what travels on the
wire); our own server builds its replies without them, on the hot path.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .protocol import ErrorCode

Scalar = int | float | bool

# The reference's name for the protocol's error codes (the same values).
WSErrorCode = ErrorCode


class ServerMode(str, Enum):
    """``simulation`` serves reset/step/state; ``production`` only tools, health and schemas."""

    SIMULATION = "simulation"
    PRODUCTION = "production"


class HealthStatus(str, Enum):
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    DEGRADED = "degraded"


class BaseMessage(BaseModel):
    """Base of the strict message models: unknown fields refused, assignments checked."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class CodeExecResult(BaseMessage):
    """Outcome of running code: its output streams and exit code."""

    stdout: str
    stderr: str
    exit_code: int


class EnvironmentMetadata(BaseMessage):
    """What ``GET /metadata`` reports; ``Environment.get_metadata()`` returns one."""

    name: str
    description: str
    readme_content: str | None = None
    version: str | None = None
    author: str | None = None
    documentation_url: str | None = None


class SchemaResponse(BaseMessage):
    action: dict[str, Any]
    observation: dict[str, Any]
    state: dict[str, Any]
    reset_observation: dict[str, Any] | None = None


class HealthResponse(BaseMessage):
    status: HealthStatus = HealthStatus.HEALTHY


class ListTasksRequest(BaseMessage):
    split: str


class NumTasksRequest(BaseMessage):
    split: str


class GetTaskRequest(BaseMessage):
    split: str
    index: int


class GetTaskRangeRequest(BaseMessage):
    split: str
    start: int | None = None
    stop: int | None = None


class WSResetMessage(BaseMessage):
    type: Literal["reset"] = "reset"
    data: dict[str, Any] = Field(default_factory=dict)


class WSStepMessage(BaseMessage):
    type: Literal["step"] = "step"
    data: dict[str, Any]


class WSStateMessage(BaseMessage):
    type: Literal["state"] = "state"


class WSCloseMessage(BaseMessage):
    type: Literal["close"] = "close"


WSIncomingMessage = Annotated[
    WSResetMessage | WSStepMessage | WSStateMessage | WSCloseMessage,
    Field(discriminator="type"),
]


class WSObservationResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["observation"] = "observation"
    data: dict[str, Any]


class WSStateResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["state"] = "state"
    data: dict[str, Any]


class WSErrorResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["error"] = "error"
    data: dict[str, Any]


class ConcurrencyConfig(BaseMessage):
    """Sessions at once and idle timeout; ``create_app(concurrency_config=...)`` reads both."""

    max_concurrent_envs: int = Field(default=1, ge=1)
    session_timeout: float | None = Field(default=None, gt=0)


class ServerCapacityStatus(BaseMessage):
    active_sessions: int = Field(ge=0)
    max_sessions: int = Field(ge=1)

    @model_validator(mode="after")
    def _within_bounds(self) -> ServerCapacityStatus:
        if self.active_sessions > self.max_sessions:
            raise ValueError(
                f"active_sessions ({self.active_sessions}) is above max_sessions ({self.max_sessions})"
            )
        return self

    @property
    def available_slots(self) -> int:
        return self.max_sessions - self.active_sessions

    @property
    def is_at_capacity(self) -> bool:
        return self.available_slots == 0

    @classmethod
    def from_counts(cls, active: int, max_sessions: int) -> ServerCapacityStatus:
        return cls(active_sessions=active, max_sessions=max_sessions)


class SessionInfo(BaseMessage):
    session_id: str
    created_at: float
    last_activity_at: float
    step_count: int = Field(default=0, ge=0)
    environment_type: str
