"""Constraint narrowing and widening in the contract check: one case per keyword pydantic emits.

Each case is a pair of pydantic field definitions, before and after; the action direction
(clients send) must call narrowing breaking and widening additive, and the observation
direction (clients read, validating with their own models) the other way round.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import ConfigDict, Field, StringConstraints, create_model

from openenv_cli.validation.contract import check_contract, diff_schemas
from openenv_cli.validation.results import Status
from openenv_runtime import Action, Observation, State


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


class Warm(enum.Enum):
    RED = "red"
    GREEN = "green"


def _schemas(annotation: Any, default: Any, kind: str) -> dict[str, Any]:
    field = (annotation, default)
    action = create_model("A", __base__=Action, x=field) if kind == "action" else Action
    observation = (
        create_model("O", __base__=Observation, x=field) if kind == "observation" else Observation
    )
    return {
        "action": action.model_json_schema(),
        "observation": observation.model_json_schema(),
        "state": State.model_json_schema(),
    }


def _verdicts(before: tuple[Any, Any], after: tuple[Any, Any], kind: str) -> list[bool]:
    found = diff_schemas(_schemas(*before, kind), _schemas(*after, kind))
    return [c.breaking for c in found if c.path.startswith("x")]


# (keyword, wide field, narrow field): the narrow one rejects some values the wide one accepts.
CASES: list[tuple[str, tuple[Any, Any], tuple[Any, Any]]] = [
    ("maximum (le), new", (int, 0), (int, Field(0, le=10))),
    ("maximum (le), lower", (int, Field(0, le=10)), (int, Field(0, le=5))),
    ("exclusiveMaximum (lt)", (int, Field(0, lt=10)), (int, Field(0, lt=5))),
    ("le → lt at the same value", (float, Field(0, le=1.0)), (float, Field(0, lt=1.0))),
    ("minimum (ge), higher", (int, Field(0, ge=0)), (int, Field(1, ge=1))),
    ("exclusiveMinimum (gt), new", (float, 1.0), (float, Field(1.0, gt=0))),
    ("multipleOf, new", (int, 0), (int, Field(0, multiple_of=2))),
    (
        "multipleOf, a multiple of the old",
        (int, Field(0, multiple_of=3)),
        (int, Field(0, multiple_of=6)),
    ),
    ("maxLength (str)", (str, Field("", max_length=100)), (str, Field("", max_length=10))),
    ("minLength (str)", (str, ""), (str, Field("x", min_length=1))),
    ("pattern, new", (str, ""), (str, Field("a", pattern=r"^[a-z]+$"))),
    ("format", (str, ""), (Annotated[str, Field(json_schema_extra={"format": "email"})], "")),
    ("maxItems (list)", (list[int], Field([], max_length=5)), (list[int], Field([], max_length=2))),
    ("minItems (list)", (list[int], []), (list[int], Field([1], min_length=1))),
    ("uniqueItems (list → set)", (list[int], []), (set[int], set())),
    ("maxProperties (dict)", (dict[str, int], {}), (dict[str, int], Field({}, max_length=3))),
    ("minProperties (dict)", (dict[str, int], {}), (dict[str, int], Field({"a": 1}, min_length=1))),
    ("enum (Literal), fewer values", (Literal["a", "b", "c"], "a"), (Literal["a", "b"], "a")),
    ("enum (Enum class), fewer members", (Colour, Colour.RED), (Warm, Warm.RED)),
    ("const (one Literal)", (Literal["a", "b"], "a"), (Literal["a"], "a")),
    ("items' maximum (list[conint])", (list[int], []), (list[Annotated[int, Field(le=3)]], [])),
    (
        "dict values' maxLength",
        (dict[str, str], {}),
        (dict[str, Annotated[str, Field(max_length=2)]], {}),
    ),
    (
        "tuple position (prefixItems)",
        (tuple[int, str], (1, "a")),
        (tuple[Annotated[int, Field(ge=0)], str], (1, "a")),
    ),
    (
        "propertyNames (dict[Literal, ...])",
        (dict[str, int], {}),
        (dict[Literal["x", "y"], int], {}),
    ),
    (
        "patternProperties (dict[constr(pattern), ...])",
        (dict[str, int], {}),
        (dict[Annotated[str, Field(pattern="^a")], int], {}),
    ),
    ("inside Optional (anyOf)", (int | None, None), (Annotated[int, Field(le=9)] | None, None)),
    ("StringConstraints", (str, ""), (Annotated[str, StringConstraints(max_length=4)], "")),
]


@pytest.mark.parametrize(("keyword", "wide", "narrow"), CASES, ids=[c[0] for c in CASES])
def test_action_narrowing_breaks_and_widening_is_additive(
    keyword: str, wide: tuple[Any, Any], narrow: tuple[Any, Any]
) -> None:
    narrowing = _verdicts(wide, narrow, "action")
    widening = _verdicts(narrow, wide, "action")
    assert narrowing and any(narrowing), f"{keyword}: narrowing not reported as breaking"
    assert widening and not any(widening), f"{keyword}: widening reported as breaking"


@pytest.mark.parametrize(("keyword", "wide", "narrow"), CASES, ids=[c[0] for c in CASES])
def test_observation_is_the_other_way_round(
    keyword: str, wide: tuple[Any, Any], narrow: tuple[Any, Any]
) -> None:
    assert not any(_verdicts(wide, narrow, "observation")), keyword  # promises more
    assert any(_verdicts(narrow, wide, "observation")), keyword  # old clients may reject


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ((str, Field("a", pattern="^a")), (str, Field("b", pattern="^b"))),
        ((int, Field(0, multiple_of=4)), (int, Field(0, multiple_of=6))),
    ],
    ids=["pattern changed", "multipleOf neither multiple"],
)
def test_incomparable_changes_break_both_ways(
    before: tuple[Any, Any], after: tuple[Any, Any]
) -> None:
    assert any(_verdicts(before, after, "action"))
    assert any(_verdicts(before, after, "observation"))


def test_unknown_fields_rejected_is_narrowing() -> None:
    class Open(Action):
        model_config = ConfigDict(extra="allow")
        x: int = 0

    class Closed(Action):
        x: int = 0

    def schemas(action: type[Action]) -> dict[str, Any]:
        return {
            "action": action.model_json_schema(),
            "observation": Observation.model_json_schema(),
            "state": State.model_json_schema(),
        }

    opened, closed = schemas(Open), schemas(Closed)
    assert opened["action"].get("additionalProperties") is not False
    assert [c.breaking for c in diff_schemas(opened, closed)] == [True]
    assert [c.breaking for c in diff_schemas(closed, opened)] == [False]


def test_unchanged_constraints_report_nothing() -> None:
    field = (int, Field(0, ge=0, le=10, multiple_of=2))
    assert _verdicts(field, field, "action") == []


def test_check_fails_on_a_tightened_bound_and_names_it(tmp_path: Path) -> None:
    wide = _schemas(int, Field(0, le=10), "action")
    narrow = _schemas(int, Field(0, le=5), "action")
    assert check_contract(tmp_path, wide, "demo", "0.1.0", update=True).status is Status.PASS
    result = check_contract(tmp_path, narrow, "demo", "0.1.0")
    assert result.status is Status.FAIL
    assert "action.x: upper bound <= 10 → <= 5 (rejects values it accepted)" in result.message
    widened = check_contract(tmp_path, _schemas(int, Field(0, le=50), "action"), "demo", "0.1.0")
    assert widened.status is Status.WARN
    assert "admits more values" in widened.message
