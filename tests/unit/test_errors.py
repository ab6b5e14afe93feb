"""The one error type, how main() renders it, and the exit codes."""

from __future__ import annotations

import pytest
from rich.console import Console

from openenv_cli import main as main_module
from openenv_cli.console import set_debug
from openenv_cli.errors import OpenEnvError, UsageError, render_error


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OPENENV_DEBUG", raising=False)
    set_debug(False)
    yield
    set_debug(False)


def run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main_module.main(argv)
    code = exc.value.code
    return 0 if code is None else int(code)


def test_exit_codes_of_the_error_types() -> None:
    assert OpenEnvError("x").exit_code == 1
    assert UsageError("x").exit_code == 2
    assert isinstance(UsageError("x"), OpenEnvError)


def test_render_shows_message_then_hint() -> None:
    console = Console(record=True, width=200)
    render_error(OpenEnvError("It broke [badly].", hint="Do the thing."), console)
    text = console.export_text()
    assert text.splitlines() == ["Error: It broke [badly].", "Hint: Do the thing."]


def test_str_includes_hint() -> None:
    assert str(OpenEnvError("a", hint="b")) == "a\nb"
    assert str(OpenEnvError("a")) == "a"


def test_usage_error_is_rendered_once_with_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    assert run(["init", "json", "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("Error:") == 1
    assert "standard library" in err
    assert "Traceback" not in err


def test_click_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["init", "--no-such-option"]) == 2
    assert run(["no-such-command"]) == 2


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--version"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("openenv-toolkit ") and out[1].startswith("openenv-runtime ")


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--help"]) == 0
    out = capsys.readouterr().out
    assert "init" in out and "validate" in out


def _explode(*args, **kwargs):
    raise RuntimeError("kaboom")


def test_unexpected_exception_is_brief_without_debug(
    monkeypatch: pytest.MonkeyPatch, capsys, tmp_path
) -> None:
    monkeypatch.setattr("openenv_cli.scaffold.render_project", _explode)
    assert run(["init", "fine_name", "-o", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "Unexpected RuntimeError: kaboom" in err
    assert "--debug" in err
    assert "Traceback" not in err


def test_debug_flag_shows_traceback(monkeypatch: pytest.MonkeyPatch, capsys, tmp_path) -> None:
    monkeypatch.setattr("openenv_cli.scaffold.render_project", _explode)
    assert run(["--debug", "init", "fine_name", "-o", str(tmp_path)]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_debug_env_var_shows_traceback(monkeypatch: pytest.MonkeyPatch, capsys, tmp_path) -> None:
    monkeypatch.setenv("OPENENV_DEBUG", "1")
    monkeypatch.setattr("openenv_cli.scaffold.render_project", _explode)
    assert run(["init", "fine_name", "-o", str(tmp_path)]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_openenv_error_from_a_command_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys, tmp_path
) -> None:
    def fail(*args, **kwargs):
        raise OpenEnvError("Templates are gone.", hint="Reinstall.")

    monkeypatch.setattr("openenv_cli.scaffold.render_project", fail)
    assert run(["init", "fine_name", "-o", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "Error: Templates are gone." in err and "Hint: Reinstall." in err
