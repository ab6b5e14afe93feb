"""The schema contract: breaking vs additive drift, and the lock file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from openenv_cli.validation.contract import (
    LOCK_FILE,
    build_lock,
    check_contract,
    diff_schemas,
    write_lock,
)
from openenv_cli.validation.results import Status
from openenv_runtime import Action, Observation, State


def schemas(action: type, observation: type = Observation, state: type = State) -> dict:
    return {
        "action": action.model_json_schema(),
        "observation": observation.model_json_schema(),
        "state": state.model_json_schema(),
    }


class A1(Action):
    message: str
    count: int = 0


class Obs1(Observation):
    text: str = ""
    score: int = 0


def changes(old: dict, new: dict) -> dict[str, bool]:
    return {f"{c.kind}.{c.path}": c.breaking for c in diff_schemas(old, new)}


def test_identical_schemas_have_no_changes() -> None:
    assert diff_schemas(schemas(A1, Obs1), schemas(A1, Obs1)) == []


def test_removed_action_field_is_breaking() -> None:
    class A2(Action):
        message: str

    assert changes(schemas(A1), schemas(A2)) == {"action.count": True}


def test_rename_is_detected() -> None:
    class A2(Action):
        text: str
        count: int = 0

    found = diff_schemas(schemas(A1), schemas(A2))
    removed = next(c for c in found if c.path == "message")
    assert removed.breaking and "renamed to `text`" in removed.description
    assert next(c for c in found if c.path == "text").breaking  # a new required field


def test_new_optional_field_is_additive_and_new_required_is_breaking() -> None:
    class A2(Action):
        message: str
        count: int = 0
        extra: str = "x"

    class A3(Action):
        message: str
        count: int = 0
        extra: str

    assert changes(schemas(A1), schemas(A2)) == {"action.extra": False}
    assert changes(schemas(A1), schemas(A3)) == {"action.extra": True}


def test_field_newly_required_is_breaking_and_newly_optional_additive() -> None:
    class A2(Action):
        message: str
        count: int

    class A3(Action):
        message: str = ""
        count: int = 0

    assert changes(schemas(A1), schemas(A2)) == {"action.count": True}
    assert changes(schemas(A1), schemas(A3)) == {"action.message": False}


def test_type_change_is_breaking() -> None:
    class A2(Action):
        message: int
        count: int = 0

    found = diff_schemas(schemas(A1), schemas(A2))
    assert [(c.path, c.breaking) for c in found] == [("message", True)]
    assert "from string to integer" in found[0].description


def test_direction_of_widening() -> None:
    class AWide(Action):
        message: str | None
        count: float = 0

    class ObsWide(Observation):
        text: str | None = ""
        score: float = 0

    # an action may accept more ...
    assert set(changes(schemas(A1), schemas(AWide)).values()) == {False}
    # ... an observation may not promise less
    assert changes(schemas(A1, Obs1), schemas(A1, ObsWide)) == {
        "observation.text": True,
        "observation.score": True,
    }
    # and narrowing is the other way round
    assert set(changes(schemas(AWide), schemas(A1)).values()) == {True}
    assert set(changes(schemas(A1, ObsWide), schemas(A1, Obs1)).values()) == {False}


def test_enum_values() -> None:
    class E1(Action):
        kind: Literal["a", "b"]

    class E2(Action):
        kind: Literal["a", "b", "c"]

    assert changes(schemas(E1), schemas(E2)) == {"action.kind": False}
    assert changes(schemas(E2), schemas(E1)) == {"action.kind": True}


def test_nested_model_fields() -> None:
    class P1(BaseModel):
        x: int
        y: int

    class P2(BaseModel):
        x: int

    class N1(Observation):
        point: P1

    class N2(Observation):
        point: P2

    assert changes(schemas(A1, N1), schemas(A1, N2)) == {"observation.point.y": True}


def test_state_changes() -> None:
    class S1(State):
        total: int = 0

    assert changes(schemas(A1, Obs1, S1), schemas(A1, Obs1, State)) == {"state.total": True}
    assert changes(schemas(A1, Obs1, State), schemas(A1, Obs1, S1)) == {"state.total": False}


def test_description_changes_are_not_drift() -> None:
    class A2(Action):
        message: str = Field(..., description="new words")
        count: int = 0

    assert diff_schemas(schemas(A1), schemas(A2)) == []


# -- the check and the file -------------------------------------------------------------------


def test_no_lock_warns(tmp_path: Path) -> None:
    result = check_contract(tmp_path, schemas(A1), "x", "1")
    assert result.status is Status.WARN and "--update-lock" in result.fix


def test_update_writes_a_stable_lock(tmp_path: Path) -> None:
    result = check_contract(tmp_path, schemas(A1), "x", "1.0", update=True)
    assert result.status is Status.PASS
    first = (tmp_path / LOCK_FILE).read_text()
    data = json.loads(first)
    assert (
        data["lock_version"] == 1
        and data["name"] == "x"
        and set(data["schemas"]) == {"action", "observation", "state"}
    )
    check_contract(tmp_path, schemas(A1), "x", "1.0", update=True)
    assert (tmp_path / LOCK_FILE).read_text() == first
    assert check_contract(tmp_path, schemas(A1), "x", "1.0").status is Status.PASS


def test_breaking_drift_fails_naming_the_change(tmp_path: Path) -> None:
    class A2(Action):
        message: str

    write_lock(tmp_path, build_lock(schemas(A1), "x", "1"))
    result = check_contract(tmp_path, schemas(A2), "x", "1")
    assert result.status is Status.FAIL
    assert "action.count: field removed" in result.message
    assert "--update-lock" in result.fix and result.file == "models.py"
    assert result.details["changes"][0]["breaking"] is True


def test_additive_drift_warns(tmp_path: Path) -> None:
    class A2(Action):
        message: str
        count: int = 0
        more: bool = False

    write_lock(tmp_path, build_lock(schemas(A1), "x", "1"))
    result = check_contract(tmp_path, schemas(A2), "x", "1")
    assert result.status is Status.WARN and "action.more: new optional field" in result.message


def test_update_reports_accepted_breaking_changes(tmp_path: Path) -> None:
    class A2(Action):
        message: str

    write_lock(tmp_path, build_lock(schemas(A1), "x", "1"))
    result = check_contract(tmp_path, schemas(A2), "x", "2", update=True)
    assert result.status is Status.PASS and "1 breaking change" in result.message
    assert check_contract(tmp_path, schemas(A2), "x", "2").status is Status.PASS


@pytest.mark.parametrize("text", ["{not json", "[]", '{"schemas": {"action": {}}}'])
def test_corrupt_lock_fails(tmp_path: Path, text: str) -> None:
    (tmp_path / LOCK_FILE).write_text(text)
    result = check_contract(tmp_path, schemas(A1), "x", "1")
    assert (
        result.status is Status.FAIL and result.file == LOCK_FILE and "--update-lock" in result.fix
    )
    assert check_contract(tmp_path, schemas(A1), "x", "1", update=True).status is Status.PASS
