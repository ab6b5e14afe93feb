import pytest
from pydantic import ValidationError

from openenv_runtime import Action, Observation, State, StepResult


class Move(Action):
    direction: str


def test_action_forbids_unknown_fields_and_has_metadata() -> None:
    assert Move(direction="up").metadata == {}
    with pytest.raises(ValidationError):
        Move(direction="up", bogus=1)  # type: ignore[call-arg]


def test_observation_defaults() -> None:
    obs = Observation()
    assert (obs.done, obs.reward, obs.metadata) == (False, None, {})
    with pytest.raises(ValidationError):
        Observation(unknown=1)  # type: ignore[call-arg]


def test_state_allows_extra_fields() -> None:
    state = State(episode_id="e", step_count=2, score=7)  # type: ignore[call-arg]
    assert state.model_dump() == {"episode_id": "e", "step_count": 2, "score": 7}


def test_step_result_is_a_plain_dataclass_like_the_reference() -> None:
    # The reference's StepResult is a mutable dataclass: a trainer may shape the reward in place.
    result = StepResult(observation=Observation(), reward=1.0, done=False)
    result.reward = 2.0
    assert (result.reward, result.done, result.metadata, result.final_observation) == (
        2.0,
        False,
        None,
        None,
    )
    with pytest.raises(AttributeError):  # slots: a misspelt field is an error, not a new one
        result.rewad = 3.0  # type: ignore[attr-defined]
