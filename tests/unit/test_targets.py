"""The CLI's one target parser: what each form of TARGET means, and which form wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv_cli.errors import UsageError
from openenv_cli.targets import Target, parse_target, started_servers, target_provider
from openenv_runtime.adapters.target import FAMILIES, Family, FamilyTarget


def test_a_known_family_prefix_wins_over_module_app() -> None:
    # `gymnasium` is importable: as MODULE:APP this would be an attribute of the package.
    target = parse_target("gymnasium:CartPole-v1")
    assert target.kind == "family"
    assert target.family == FamilyTarget("gymnasium", "CartPole-v1", {})
    assert parse_target("reasoning_gym:leg_counting").kind == "family"


def test_a_known_family_prefix_wins_over_docker_image_names() -> None:
    # `textarena:latest` is also a well-formed image reference (repository:tag).
    target = parse_target("textarena:latest")
    assert (target.kind, target.family) == ("family", FamilyTarget("textarena", "latest", {}))


def test_the_query_string_travels_inside_the_target() -> None:
    target = parse_target("reasoning_gym:leg_counting?size=500&seed=3")
    assert target.family == FamilyTarget(
        "reasoning_gym", "leg_counting", {"size": "500", "seed": "3"}
    )
    assert str(target) == "reasoning_gym:leg_counting?size=500&seed=3"


def test_a_family_target_without_a_name_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="gymnasium:NAME"):
        parse_target("gymnasium:")
    with pytest.raises(UsageError, match="twice"):
        parse_target("reasoning_gym:leg_counting?seed=1&seed=2")


def test_the_other_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "proj").mkdir()
    assert parse_target("http://127.0.0.1:8000/") == Target("url", "http://127.0.0.1:8000")
    assert parse_target("https://org-env.hf.space").kind == "url"
    assert parse_target("proj") == Target("project", "proj")
    assert parse_target("agent.py:app") == Target("project", "agent.py:app")
    assert parse_target("space:org/env") == Target("space", "org/env")
    assert parse_target("org/env") == Target("space", "org/env")
    assert parse_target("image:my_env:0.1") == Target("image", "my_env:0.1")
    assert parse_target("python:3.11-slim") == Target("image", "python:3.11-slim")


def test_a_family_whose_library_is_missing_is_one_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(
        FAMILIES, "nolib", Family("openenv_runtime.adapters.nolib", "nolib", "no_such_pkg_4f1")
    )
    target = parse_target("nolib:Thing-v0")
    assert target.kind == "family"
    with pytest.raises(UsageError, match=r'pip install "openenv-runtime\[nolib\]"'):
        target_provider(target)


def test_urls_start_nothing() -> None:
    with started_servers(["http://127.0.0.1:1", "http://127.0.0.1:2/"]) as (urls, origin):
        assert urls == ["http://127.0.0.1:1", "http://127.0.0.1:2"]
        assert origin == {}
