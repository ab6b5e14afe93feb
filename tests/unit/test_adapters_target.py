"""FAMILY:NAME[?key=value&...] targets: parsing, precedence, the missing-extra error, the app."""

from __future__ import annotations

import sys

import pytest
from fastapi.testclient import TestClient

from openenv_runtime.adapters.target import (
    FAMILIES,
    FamilyTarget,
    as_family_target,
    create_family_app,
    load_family,
    parse_family_target,
)
from openenv_runtime.errors import AdapterError
from tests.support.optional import require


def test_a_target_splits_into_family_name_and_options() -> None:
    target = parse_family_target("reasoning_gym:leg_counting?size=500&seed=3")
    assert target == FamilyTarget("reasoning_gym", "leg_counting", {"size": "500", "seed": "3"})
    assert parse_family_target("gymnasium:CartPole-v1") == FamilyTarget(
        "gymnasium", "CartPole-v1", {}
    )
    # a namespaced id keeps its slash; query values are URL-decoded
    assert parse_family_target("gymnasium:ALE/Pong-v5?render_mode=rgb%5Farray&x=a+b") == (
        FamilyTarget("gymnasium", "ALE/Pong-v5", {"render_mode": "rgb_array", "x": "a b"})
    )


def test_a_target_prints_back_to_what_parses_the_same() -> None:
    for text in ("gymnasium:CartPole-v1", "textarena:Wordle-v0?a=1&b=x%26y"):
        target = parse_family_target(text)
        assert target is not None
        assert parse_family_target(str(target)) == target


@pytest.mark.parametrize(
    "text",
    [
        "my_env.server.app:app",  # MODULE:APP
        "gymnasium.envs:app",  # a module *under* a family's package is still MODULE:APP
        "guess.py:app",
        "ghcr.io/org/image:latest",  # Docker image names
        "echo-env:1.0",
        "localhost:5000/img:tag",
        "gymnasium",  # no colon
        "Gymnasium:CartPole-v1",  # the prefix is exact
    ],
)
def test_anything_else_is_not_a_family_target(text: str) -> None:
    assert parse_family_target(text) is None


def test_a_known_family_wins_over_module_app() -> None:
    # `gymnasium` is importable, so gymnasium:CartPole-v1 is also a valid MODULE:APP form
    assert "gymnasium" in FAMILIES
    target = parse_family_target("gymnasium:CartPole-v1")
    assert target is not None and target.family == "gymnasium"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("gymnasium:", "names no environment"),
        ("gymnasium:?x=1", "names no environment"),
        ("gymnasium:CartPole-v1?a=1&a=2", "given twice"),
        ("gymnasium:CartPole-v1?novalue", "not a URL query"),
    ],
)
def test_a_broken_target_is_one_clear_error(text: str, words: str) -> None:
    with pytest.raises(AdapterError, match=words):
        parse_family_target(text)


def test_a_non_family_string_is_refused_where_a_family_is_required() -> None:
    with pytest.raises(AdapterError, match="gymnasium:, reasoning_gym:, textarena:"):
        as_family_target("my_env.server.app:app")


def test_a_missing_package_is_one_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # import gymnasium now fails
    with pytest.raises(AdapterError) as caught:
        load_family(FamilyTarget("gymnasium", "CartPole-v1", {}))
    message = str(caught.value)
    assert 'pip install "openenv-runtime[gymnasium]"' in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("family", "extra"),
    [
        ("gymnasium", "gymnasium"),
        ("reasoning_gym", "reasoning-gym"),
        ("textarena", "textarena"),
        ("harbor", "harbor"),
        ("verifiers", "verifiers"),
    ],
)
def test_every_family_names_its_extra(
    monkeypatch: pytest.MonkeyPatch, family: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, FAMILIES[family].package, None)
    with pytest.raises(AdapterError, match=rf'pip install "openenv-runtime\[{extra}\]"'):
        load_family(FamilyTarget(family, "x", {}))


def test_create_family_app_serves_the_environment() -> None:
    require("gymnasium")
    app = create_family_app("gymnasium:CartPole-v1?max_episode_steps=3")
    with TestClient(app) as client:
        assert client.get("/metadata").json()["name"] == "CartPole-v1"
        first = client.post("/reset", json={"seed": 1}).json()
        session = first["session_id"]
        assert len(first["observation"]["observation"]) == 4
        for _ in range(3):
            step = client.post(
                "/step", json={"action": {"action": 1}, "session_id": session}
            ).json()
        # max_episode_steps=3 reached Gymnasium as an int: the third step truncates
        assert step["observation"]["truncated"] or step["observation"]["terminated"]
        assert step["done"] is True


def test_a_familys_shutdown_runs_once_when_the_server_stops_after_its_sessions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from openenv_runtime.adapters import target
    from openenv_runtime.models import State
    from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation

    events: list[str] = []

    class Closing(EchoEnvironment):
        def close(self) -> None:
            events.append("session closed")

    adapted = target.AdaptedEnvironment(
        factory=Closing,
        action_cls=EchoAction,
        observation_cls=EchoObservation,
        state_cls=State,
        name="echo",
        description="",
        package="x",
        package_version="1",
        shutdown=lambda: events.append("shutdown"),
    )
    monkeypatch.setattr(target, "load_family", lambda _target: adapted)
    app = create_family_app("gymnasium:anything")
    with TestClient(app) as client:
        client.post("/reset", json={})
        assert events == []
    assert events == ["session closed", "shutdown"]
