"""openenv validate with its smoke test (a real server in a child process) and with --url.

The tests of ``validation/smoke.py`` and ``validation/wire.py``; the other validation
modules have unit tests named for them (``tests/unit/test_validation_*.py``), and
``validation/runner.py``, ``render.py`` and ``results.py`` are tested through the command
(``test_validation_project.py``, ``test_validate_command.py``).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from typer.testing import CliRunner

from openenv_cli.main import app as cli
from openenv_cli.scaffold import render_project, write_project
from openenv_cli.validation import smoke, validate_project, validate_url
from openenv_cli.validation.results import Status
from openenv_runtime import create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import running_server
from openenv_runtime.wire import EnvironmentMetadata
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation

runner = CliRunner()


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    write_project(render_project("my_env"), tmp_path / "my_env")
    return tmp_path / "my_env"


@pytest.fixture()
def started(monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen]:
    """Every server process the smoke test starts, to prove each one was stopped."""
    procs: list[subprocess.Popen] = []
    real = subprocess.Popen

    def recording(args, *rest, **kwargs):
        proc = real(args, *rest, **kwargs)
        if "openenv_runtime.serve" in args:
            procs.append(proc)
        return proc

    monkeypatch.setattr(smoke.subprocess, "Popen", recording)
    return procs


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def assert_stopped(procs: list[subprocess.Popen]) -> None:
    assert procs, "no server was started"
    assert all(p.poll() is not None for p in procs)


def test_fresh_project_passes_everything(project: Path, started) -> None:
    report = validate_project(project, timeout=60)
    assert report.ok, [(c.name, c.message) for c in report.checks if c.status is Status.FAIL]
    names = [c.name for c in report.checks]
    assert names[-6:] == [
        "smoke.start",
        "smoke.health",
        "smoke.schema",
        "smoke.episode",
        "smoke.checkpoint",
        "smoke.seed",
    ]
    assert report.get("smoke.checkpoint").status is Status.PASS  # the template opts in
    assert report.get("smoke.seed").status is Status.PASS  # deterministic: nothing to seed
    episode = report.get("smoke.episode")
    assert episode.status is Status.PASS and "closed with 1000" in episode.message
    latency = episode.details["latency"]
    assert latency["reset_ms"] > 0 and len(latency["step_ms"]) == 1 and latency["state_ms"] > 0
    assert report.get("smoke.schema").status is Status.PASS  # served schemas equal models.py's
    assert_stopped(started)


def test_cli_table_and_json(project: Path, started) -> None:
    result = runner.invoke(cli, ["validate", str(project)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "smoke.episode" in result.output and "OK:" in result.output
    result = runner.invoke(cli, ["validate", str(project), "--json"])
    data = json.loads(result.stdout)
    assert data["ok"] and any(
        c["name"] == "smoke.episode" and c["status"] == "pass" for c in data["checks"]
    )
    assert_stopped(started)


def test_a_checkpoint_that_forgets_state_fails(project: Path, started) -> None:
    edit(
        project / "server" / "my_env_environment.py",
        "        self._state = MyState.model_validate(state)",
        "        pass  # forgets the episode",
    )
    result = validate_project(project, timeout=30).get("smoke.checkpoint")
    assert result.status is Status.FAIL, result
    assert "differs" in result.message and "state.step_count" in result.message
    assert "export_state()" in result.fix
    assert_stopped(started)


def test_an_environment_without_checkpoints_skips_the_check(project: Path, started) -> None:
    edit(project / "server" / "my_env_environment.py", "    SUPPORTS_CHECKPOINT = True\n", "")
    report = validate_project(project, timeout=30)
    result = report.get("smoke.checkpoint")
    assert result.status is Status.SKIP and "SUPPORTS_CHECKPOINT" in result.message
    assert report.ok
    assert_stopped(started)


def test_reset_raises(project: Path, started) -> None:
    edit(
        project / "server" / "my_env_environment.py",
        "        # This environment is deterministic",
        "        raise RuntimeError('reset is broken')\n        # This environment is deterministic",
    )
    report = validate_project(project, timeout=30)
    result = report.get("smoke.episode")
    assert (
        result.status is Status.FAIL
        and "reset" in result.message
        and "EXECUTION_ERROR" in result.message
    )
    assert "reset()" in result.fix
    assert_stopped(started)


def test_step_raises(project: Path, started) -> None:
    edit(
        project / "server" / "my_env_environment.py",
        "        self._state.step_count += 1",
        "        raise ValueError('step is broken')",
    )
    result = validate_project(project, timeout=30).get("smoke.episode")
    assert result.status is Status.FAIL and "step" in result.message and "step()" in result.fix
    assert_stopped(started)


def test_state_not_a_state(project: Path, started) -> None:
    edit(
        project / "server" / "my_env_environment.py",
        "        return self._state\n",
        "        return 42\n",
    )
    result = validate_project(project, timeout=30).get("smoke.episode")
    assert result.status is Status.FAIL and "state" in result.message
    assert_stopped(started)


def test_hanging_reset_is_time_bounded(project: Path, started) -> None:
    edit(
        project / "server" / "my_env_environment.py",
        "        # This environment is deterministic",
        "        import time; time.sleep(60)\n        # This environment is deterministic",
    )
    begin = time.monotonic()
    report = validate_project(project, timeout=6)
    result = report.get("smoke.episode")
    assert result is not None, [(c.name, c.message) for c in report.checks]
    assert (
        result.status is Status.FAIL and "within 6s" in result.message and "--timeout" in result.fix
    )
    assert time.monotonic() - begin < 45
    assert_stopped(started)


def test_server_dies_at_startup(project: Path, started) -> None:
    edit(
        project / "server" / "app.py",
        "app = create_app(",
        "import sys\nif sys.argv[0].endswith('serve.py'):\n    raise RuntimeError('boom at startup')\napp = create_app(",
    )
    report = validate_project(project, timeout=30)
    assert report.get("app").status is Status.PASS  # importing is fine; serving is not
    result = report.get("smoke.start")
    assert (
        result.status is Status.FAIL
        and "exited with code" in result.message
        and "boom at startup" in result.message
    )
    assert "openenv_runtime.serve my_env.server.app:app" in result.fix
    assert_stopped(started)


def test_app_without_openenv_routes(project: Path, started) -> None:
    (project / "server" / "app.py").write_text(
        "from fastapi import FastAPI\napp = FastAPI()\n\n@app.get('/health')\ndef health():\n    return {'status': 'healthy'}\n"
    )
    report = validate_project(project, timeout=30)
    assert not report.ok
    assert report.get("smoke.schema").status is Status.FAIL
    assert report.get("smoke.episode").status is Status.FAIL
    assert_stopped(started)


def test_no_smoke_starts_nothing(project: Path, started) -> None:
    report = validate_project(project, smoke=False)
    assert report.ok and report.get("smoke").status is Status.SKIP
    assert started == []


# -- --url ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    app = create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        metadata=EnvironmentMetadata(name="echo", description="Echo", version="1.2.3"),
    )
    with running_server(app) as url:
        yield url


def test_url_mode_passes_with_latencies(echo_url: str) -> None:
    report = validate_url(echo_url, timeout=10)
    assert report.ok, [(c.name, c.message) for c in report.checks]
    assert [c.name for c in report.checks] == [
        "remote.health",
        "remote.schema",
        "remote.metadata",
        "remote.episode",
    ]
    episode = report.get("remote.episode")
    assert len(episode.details["latency"]["step_ms"]) == 3
    assert episode.details["action"] == {"message": "hello"}  # built from the served schema
    assert "echo 1.2.3" in report.get("remote.metadata").message


def test_url_mode_cli(echo_url: str) -> None:
    result = runner.invoke(cli, ["validate", "--url", echo_url, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["target"] == echo_url


def test_url_mode_uses_the_project_example_and_lock(echo_url: str, tmp_path: Path) -> None:
    (tmp_path / "openenv.yaml").write_text(
        "name: echo\napp: echo.server.app:app\nexample_action: {message: boom}\n"
    )
    report = validate_url(echo_url, project_dir=tmp_path, timeout=10)
    episode = report.get("remote.episode")
    assert (
        episode.status is Status.FAIL and "EXECUTION_ERROR" in episode.message
    )  # the example makes it explode

    from openenv_cli.validation.contract import build_lock, write_lock
    from openenv_runtime import State

    class Old(EchoAction):
        extra_required: int

    locked = {
        "action": Old.model_json_schema(),
        "observation": EchoObservation.model_json_schema(),
        "state": State.model_json_schema(),
    }
    write_lock(tmp_path, build_lock(locked, "echo", "1"))
    (tmp_path / "openenv.yaml").write_text("name: echo\napp: echo.server.app:app\n")
    contract = validate_url(echo_url, project_dir=tmp_path, timeout=10).get("contract")
    assert (
        contract.status is Status.FAIL
        and "action.extra_required: field removed" in contract.message
    )


def test_url_mode_with_token() -> None:
    app = create_app(
        EchoEnvironment, EchoAction, EchoObservation, settings=ServerSettings(api_key="s3cret")
    )
    with running_server(app) as url:
        report = validate_url(url, timeout=10)
        assert report.get("remote.health").status is Status.PASS  # /health stays open
        schema = report.get("remote.schema")
        assert schema.status is Status.FAIL and "--token" in schema.fix
        assert validate_url(url, timeout=10, token="s3cret").ok
        result = runner.invoke(cli, ["validate", "--url", url], env={"OPENENV_API_KEY": "s3cret"})
        assert result.exit_code == 0, result.output


def test_url_mode_against_a_plain_server() -> None:
    plain = FastAPI()

    @plain.get("/health")
    def health() -> dict:
        return {"status": "healthy"}

    with running_server(plain) as url:
        report = validate_url(url, timeout=5)
    assert not report.ok and report.get("remote.schema").status is Status.FAIL
    assert report.get("remote.episode").status in (Status.SKIP, Status.FAIL)


def test_url_mode_unreachable() -> None:
    from openenv_runtime.testing import free_port

    report = validate_url(f"http://127.0.0.1:{free_port()}", timeout=2)
    assert not report.ok and "Cannot reach" in report.checks[0].message
    assert [c.status for c in report.checks[1:]] == [Status.SKIP] * 3
