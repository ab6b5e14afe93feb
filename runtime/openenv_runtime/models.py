"""The typed messages of an environment: actions, observations, state, step results.

Subclass these in your project's ``models.py``. The semantics follow the OpenEnv
protocol: ``Action`` and ``Observation`` refuse unknown fields, ``State`` accepts them,
and on the wire ``reward`` and ``done`` travel beside the observation, not inside it.

Fields are validated when a model is built, not on every assignment
(``state.step_count += 1`` stays cheap on the hot path); set
``model_config = ConfigDict(validate_assignment=True)`` in a subclass to check assignments too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field


class Action(BaseModel):
    """What an agent sends to ``step()``. Add your own typed fields in a subclass."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Free-form data that travels with the action."
    )


class Observation(BaseModel):
    """What ``reset()`` and ``step()`` return. Add your own typed fields in a subclass.

    Set ``reward`` and ``done`` on the observation you return; the server moves them into
    the message envelope, where OpenEnv clients read them.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    done: bool = Field(default=False, description="Whether the episode has ended.")
    reward: float | int | bool | None = Field(
        default=None, description="Reward for the last action."
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Free-form data sent with the observation."
    )


class State(BaseModel):
    """Episode bookkeeping returned by the ``state`` property. Extra fields are allowed."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    episode_id: str | None = Field(default=None, description="Identifier of the current episode.")
    step_count: int = Field(default=0, ge=0, description="Steps taken in the current episode.")


ObsT = TypeVar("ObsT", bound=Observation)

# Fields that leave the observation body and travel in the envelope instead.
ENVELOPE_FIELDS = frozenset({"reward", "done"})


@dataclass(slots=True)
class StepResult(Generic[ObsT]):
    """What the client's ``reset()`` and ``step()`` return."""

    observation: ObsT
    reward: float | int | bool | None = None
    done: bool = False
    # The envelope's ``metadata`` (sent beside the observation when non-empty), as the reference has it.
    metadata: dict[str, Any] | None = None
    # The episode's last observation when the pool reset it in the same step (autoreset
    # "same_step"); ``observation`` is then the new episode's first one.
    final_observation: ObsT | None = None
