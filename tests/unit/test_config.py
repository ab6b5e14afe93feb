"""Flag, then environment variable, then openenv.yaml, then default."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv_cli.config import (
    Resolved,
    Setting,
    manifest_lookup,
    parse_assignments,
    parse_bool,
    parse_int,
    resolve,
)
from openenv_cli.errors import UsageError
from openenv_cli.manifest import parse_manifest

MANIFEST = parse_manifest(
    {"name": "my_env", "app": "my_env.server.app:app", "port": 9001, "server": {"workers": 3}},
    Path("my_env"),
).manifest
WORKERS = Setting(
    "workers", env="WORKERS", manifest_key="server.workers", default=1, parse=parse_int
)


def test_flag_wins() -> None:
    got = WORKERS.resolve(flag=5, manifest=MANIFEST, environ={"WORKERS": "4"})
    assert got == Resolved(5, "flag", "--workers")


def test_env_beats_manifest() -> None:
    assert WORKERS.resolve(manifest=MANIFEST, environ={"WORKERS": "4"}) == Resolved(
        4, "env", "WORKERS"
    )


def test_manifest_beats_default() -> None:
    got = WORKERS.resolve(manifest=MANIFEST, environ={})
    assert (
        got.value == 3 and got.source == "manifest" and got.origin == "openenv.yaml: server.workers"
    )


def test_default_last() -> None:
    assert WORKERS.resolve(manifest=None, environ={}) == Resolved(1, "default", "default")


def test_empty_env_is_unset() -> None:
    assert WORKERS.resolve(manifest=MANIFEST, environ={"WORKERS": "  "}).source == "manifest"


def test_flag_false_counts_as_given() -> None:
    setting = Setting("web", env="ENABLE_WEB_INTERFACE", default=True, parse=parse_bool)
    assert setting.resolve(flag=False, environ={"ENABLE_WEB_INTERFACE": "1"}).value is False


def test_bad_env_value_is_a_usage_error_naming_the_variable() -> None:
    with pytest.raises(UsageError) as exc:
        WORKERS.resolve(environ={"WORKERS": "many"})
    assert "WORKERS" in exc.value.message and exc.value.exit_code == 2
    assert "unset WORKERS" in (exc.value.hint or "")


@pytest.mark.parametrize(
    "raw,value",
    [
        ("1", True),
        ("true", True),
        ("YES", True),
        ("on", True),
        ("0", False),
        ("off", False),
        ("No", False),
    ],
)
def test_parse_bool(raw: str, value: bool) -> None:
    assert parse_bool(raw) is value


def test_parse_bool_rejects_other_words() -> None:
    with pytest.raises(ValueError):
        parse_bool("maybe")


def test_manifest_lookup_on_models_and_dicts() -> None:
    assert manifest_lookup(MANIFEST, "port") == 9001
    assert manifest_lookup(MANIFEST, "build.base_image") == "python:3.11-slim"
    assert manifest_lookup({"a": {"b": 2}}, "a.b") == 2
    assert manifest_lookup({"a": None}, "a.b") is None
    assert manifest_lookup(MANIFEST, "server.nothing") is None


def test_resolve_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_TEST_PORT", "7000")
    got = resolve(
        "port",
        env="OPENENV_TEST_PORT",
        manifest=MANIFEST,
        manifest_key="port",
        default=8000,
        parse=parse_int,
    )
    assert got.value == 7000
    assert got.describe() == "7000 (from OPENENV_TEST_PORT)"


# -- K=V options (--build-arg, -e, --secret) ----------------------------------------------


def test_parse_assignments() -> None:
    assert parse_assignments(["A=1", "B=x=y", "A=2", "EMPTY="], "-e") == {
        "A": "2",
        "B": "x=y",
        "EMPTY": "",
    }


@pytest.mark.parametrize("raw", ["=1", "1A=x", "A-B=x", "A B=x"])
def test_parse_assignments_bad_keys(raw: str) -> None:
    with pytest.raises(UsageError, match="NAME=VALUE"):
        parse_assignments([raw], "-e")


def test_parse_assignments_missing_value() -> None:
    with pytest.raises(UsageError, match="has no value"):
        parse_assignments(["LEVEL"], "-e")


def test_secret_from_the_environment() -> None:
    assert parse_assignments(["TOKEN"], "--secret", environ={"TOKEN": "s3cr3t"}, secret=True) == {
        "TOKEN": "s3cr3t"
    }


def test_secret_errors_quote_nothing() -> None:
    for raw in ["hunter2-is-my-password", "hunter2isMyPassword"]:
        with pytest.raises(UsageError) as caught:
            parse_assignments(["OK=1", raw], "--secret", environ={}, secret=True)
        assert "hunter2" not in str(caught.value)
        assert "--secret #2" in caught.value.message


def test_a_bare_secret_name_that_is_not_set_is_named() -> None:
    with pytest.raises(UsageError) as caught:
        parse_assignments(["OK=1", "HF_TOKEN"], "--secret", environ={}, secret=True)
    assert caught.value.message.startswith("--secret HF_TOKEN has no value")
    assert "export HF_TOKEN" in (caught.value.hint or "")
