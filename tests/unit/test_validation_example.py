"""Example values built from JSON schemas."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from openenv_cli.validation.example import example_action, example_value
from openenv_runtime import Action


class Inner(BaseModel):
    x: int = Field(..., ge=3)
    label: str


class Rich(Action):
    message: str
    count: int = Field(..., gt=0)
    ratio: float = Field(..., ge=0.5)
    flag: bool
    kind: Literal["a", "b"]
    tags: list[str] = Field(..., min_length=2)
    inner: Inner
    maybe: Inner | None
    short: str = Field(..., max_length=2)
    long: str = Field(..., min_length=8)
    optional: int = 7


def test_example_validates_for_a_rich_action() -> None:
    value = example_action(Rich.model_json_schema())
    Rich.model_validate(value)
    assert "optional" not in value  # only required fields are filled
    assert value["kind"] == "a" and len(value["tags"]) == 2 and value["count"] == 1


def test_defaults_and_examples_are_used() -> None:
    assert example_value({"type": "string", "default": "d"}) == "d"
    assert example_value({"type": "integer", "examples": [42]}) == 42
    assert example_value({"const": 5}) == 5
    assert (
        example_value({"anyOf": [{"type": "null"}, {"type": "number", "exclusiveMinimum": 1}]})
        == 2.0
    )


def test_non_object_schema_gives_empty_action() -> None:
    assert example_action({"type": "string"}) == {}
