"""`openenv capture`: its settings (flag, then environment variable) and what reaches the proxy."""

from __future__ import annotations

from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner

from openenv_cli.commands.capture import resolve
from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.main import app

UPSTREAM = "http://127.0.0.1:9/v1"


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The apps `openenv capture` would serve (uvicorn.run records instead of serving)."""
    apps: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda served_app, **kw: apps.append(served_app))
    for name in ("OPENENV_CAPTURE_MAX_BODY_BYTES", "OPENENV_CAPTURE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return apps


def test_the_body_limit_flag_reaches_the_proxy_and_is_printed(served: list[Any]) -> None:
    result = CliRunner().invoke(
        app, ["capture", "--upstream", UPSTREAM, "--max-body-bytes", "1000"]
    )
    assert result.exit_code == 0, result.output
    assert served[0].max_body_bytes == 1000
    assert "request bodies up to 1,000 bytes" in result.output


def test_without_the_flag_the_environment_then_the_proxy_default_apply(
    served: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["capture", "--upstream", UPSTREAM]).exit_code == 0
    default = served[0].max_body_bytes
    assert default > 1 << 20
    monkeypatch.setenv("OPENENV_CAPTURE_MAX_BODY_BYTES", "2048")
    assert runner.invoke(app, ["capture", "--upstream", UPSTREAM]).exit_code == 0
    assert served[1].max_body_bytes == 2048
    flag = ["capture", "--upstream", UPSTREAM, "--max-body-bytes", "4096"]
    assert runner.invoke(app, flag).exit_code == 0
    assert served[2].max_body_bytes == 4096  # the flag beats the environment


@pytest.mark.parametrize("raw", ["lots", "0", "-5"])
def test_a_bad_limit_in_the_environment_says_what_to_set(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("OPENENV_CAPTURE_MAX_BODY_BYTES", raw)
    with pytest.raises(UsageError, match="OPENENV_CAPTURE_MAX_BODY_BYTES"):
        resolve(UPSTREAM, "127.0.0.1", 8300, None, None)


def test_a_zero_flag_is_refused_by_the_option(served: list[Any]) -> None:
    result = CliRunner().invoke(app, ["capture", "--upstream", UPSTREAM, "--max-body-bytes", "0"])
    assert result.exit_code != 0
    assert not served


def test_off_the_loopback_interface_an_admin_token_is_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENENV_CAPTURE_TOKEN", raising=False)
    with pytest.raises(OpenEnvError, match="admin token"):
        resolve(UPSTREAM, "0.0.0.0", 8300, None, None)
    assert resolve(UPSTREAM, "0.0.0.0", 8300, None, "T").admin_token == "T"


def test_the_upstream_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENENV_CAPTURE_UPSTREAM", raising=False)
    with pytest.raises(UsageError, match="model server's URL"):
        resolve(None, "127.0.0.1", 8300, None, None)


def test_the_session_cap_comes_from_the_flag_then_the_environment(
    served: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    monkeypatch.delenv("OPENENV_CAPTURE_MAX_SESSIONS", raising=False)
    result = runner.invoke(app, ["capture", "--upstream", UPSTREAM])
    printed = " ".join(result.output.split())  # rich wraps at the terminal's width
    assert result.exit_code == 0 and f"at most {served[0].max_sessions:,} sessions" in printed
    monkeypatch.setenv("OPENENV_CAPTURE_MAX_SESSIONS", "7")
    assert runner.invoke(app, ["capture", "--upstream", UPSTREAM]).exit_code == 0
    assert served[1].max_sessions == 7
    flag = ["capture", "--upstream", UPSTREAM, "--max-sessions", "9"]
    assert runner.invoke(app, flag).exit_code == 0
    assert served[2].max_sessions == 9
    monkeypatch.setenv("OPENENV_CAPTURE_MAX_SESSIONS", "none")
    with pytest.raises(UsageError, match="OPENENV_CAPTURE_MAX_SESSIONS"):
        resolve(UPSTREAM, "127.0.0.1", 8300, None, None)


def test_the_collector_is_kept_off_start_up_objects_unless_turned_off(
    served: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    tuned: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: tuned.append(True))
    monkeypatch.setattr(gc, "set_threshold", lambda *threshold: None)
    runner = CliRunner()
    monkeypatch.delenv("OPENENV_GC_TUNING", raising=False)
    assert runner.invoke(app, ["capture", "--upstream", UPSTREAM]).exit_code == 0
    assert tuned == [True]
    monkeypatch.setenv("OPENENV_GC_TUNING", "0")
    assert runner.invoke(app, ["capture", "--upstream", UPSTREAM]).exit_code == 0
    assert tuned == [True]  # not again
    assert resolve(UPSTREAM, "127.0.0.1", 8300, None, None).gc_tuning is False
    for raw, expected in (("off", False), ("no", False), ("1", True), ("true", True)):
        monkeypatch.setenv("OPENENV_GC_TUNING", raw)
        assert resolve(UPSTREAM, "127.0.0.1", 8300, None, None).gc_tuning is expected
    monkeypatch.setenv("OPENENV_GC_TUNING", "sometimes")  # read as `openenv serve` reads it
    with pytest.raises(UsageError, match="OPENENV_GC_TUNING"):
        resolve(UPSTREAM, "127.0.0.1", 8300, None, None)
