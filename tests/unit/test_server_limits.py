"""The bounded validation errors and the message that names the first wrong field."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from openenv_runtime.server.guards.limits import (
    MAX_NAME_CHARS,
    invalid_action_text,
    validation_errors,
)


class Move(BaseModel):
    message: str
    times: int


def errors_of(data: object) -> tuple[list[dict[str, object]], int]:
    with pytest.raises(ValidationError) as info:
        Move.model_validate(data)
    return validation_errors(info.value)


def test_the_message_names_the_first_wrong_field_and_counts_the_rest() -> None:
    assert invalid_action_text(*errors_of({"message": 5, "times": 1})) == (
        "Invalid action: message: Input should be a valid string"
    )
    text = invalid_action_text(*errors_of({}))
    assert text == "Invalid action: message: Field required (and 1 more error)"


def test_a_long_field_name_from_the_client_is_cut() -> None:
    errors = [{"loc": ["x" * 10_000], "msg": "Extra inputs are not permitted", "type": "extra"}]
    assert len(invalid_action_text(errors, 3)) < MAX_NAME_CHARS * 2 + 50


def test_no_errors_still_says_what_happened() -> None:
    assert invalid_action_text([], 0) == "Invalid action"
