"""Project names: the rules a name must pass, the suggested names, the class names."""

from __future__ import annotations

import pytest

from openenv_cli.errors import UsageError
from openenv_cli.project_names import (
    class_names,
    validate_project_name,
)


@pytest.mark.parametrize(
    "name,expected",
    [
        ("my_env", ("MyEnv", "MyAction", "MyObservation", "MyState", "MyEnvironment")),
        ("echo", ("EchoEnv", "EchoAction", "EchoObservation", "EchoState", "EchoEnvironment")),
        (
            "grid_world_env",
            (
                "GridWorldEnv",
                "GridWorldAction",
                "GridWorldObservation",
                "GridWorldState",
                "GridWorldEnvironment",
            ),
        ),
        (
            "chess_environment",
            ("ChessEnv", "ChessAction", "ChessObservation", "ChessState", "ChessEnvironment"),
        ),
        ("env2", ("Env2Env", "Env2Action", "Env2Observation", "Env2State", "Env2Environment")),
    ],
)
def test_class_names(name: str, expected: tuple[str, ...]) -> None:
    names = class_names(name)
    assert (
        names.client,
        names.action,
        names.observation,
        names.state,
        names.environment,
    ) == expected


@pytest.mark.parametrize("name", ["my_env", "echo", "chess2", "a_b_c"])
def test_good_names(name: str) -> None:
    validate_project_name(name)


@pytest.mark.parametrize(
    "name,needle",
    [
        ("", "empty"),
        ("my-env", "not a valid project name"),
        ("2fast", "not a valid project name"),
        ("MyEnv", "not a valid project name"),
        ("_private", "not a valid project name"),
        ("café", "not a valid project name"),
        ("class", "keyword"),
        ("match", "keyword"),
        ("json", "standard library"),
        ("asyncio", "standard library"),
        ("test", "standard library"),
        ("fastapi", "shadow a package"),
        ("pydantic", "shadow a package"),
        ("uvicorn", "shadow a package"),
        ("websockets", "shadow a package"),
        ("openenv", "shadow a package"),
        ("openenv_runtime", "shadow a package"),
        ("tests", "shadow a package"),
        ("my_env_", "not a valid project name"),
        ("a__b", "not a valid project name"),
        ("x" * 65, "not a valid project name"),
        ("env", "shadow a package"),
        ("a/b", "contains a path"),
        ("../up", "contains a path"),
        ("..", "contains a path"),
    ],
)
def test_bad_names(name: str, needle: str) -> None:
    with pytest.raises(UsageError) as exc:
        validate_project_name(name)
    assert needle in exc.value.message
    assert exc.value.hint  # always says what to do


@pytest.mark.parametrize(
    "name,suggested",
    [
        ("My-Env", "my_env"),
        ("my_env_", "my_env"),
        ("a__b", "a_b"),
        ("env", "my_env"),
        ("environment", "my_environment"),
        ("test", "test_env"),
        ("json", "json_env"),
        ("class", "class_env"),
        ("2fast", "env_2fast"),
        ("_", "my_env"),
        ("x" * 70, "x" * 64),
    ],
)
def test_bad_name_hint_suggests_a_valid_name(name: str, suggested: str) -> None:
    with pytest.raises(UsageError) as exc:
        validate_project_name(name)
    assert exc.value.hint is not None
    suggestion = exc.value.hint.split("`openenv init ")[1].rstrip("`.")
    assert suggestion == suggested
    validate_project_name(suggestion)  # never a suggestion that is refused in turn
