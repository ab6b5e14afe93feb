from pathlib import Path

import pytest

from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.scaffold import render_project, write_project
from openenv_cli.serving import check_port_free, open_file_advice, plan_serve

ENV_VARS = (
    "HOST",
    "PORT",
    "WORKERS",
    "MAX_CONCURRENT_ENVS",
    "SESSION_TIMEOUT",
    "ENABLE_WEB_INTERFACE",
    "OPENENV_SERVER_FLAGS",
    "OPENENV_MANIFEST",
)


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    dest = tmp_path / "demo_env"
    write_project(render_project("demo_env", {}), dest, force=False)
    return dest


def test_defaults_come_from_the_manifest(project: Path) -> None:
    plan = plan_serve(project)
    assert plan.settings.host == "127.0.0.1"  # a development server is not exposed by accident
    assert (plan.settings.port, plan.resolved.origin("port").source) == (8000, "openenv.yaml")
    assert plan.settings.workers == 1
    assert plan.settings.web_interface is True


def test_the_from_column_tells_the_truth(project: Path) -> None:
    (project / "openenv.yaml").write_text(
        "spec_version: 1\nname: demo_env\napp: demo_env.server.app:app\n", encoding="utf-8"
    )
    rows = {name: source for name, _, source in plan_serve(project).rows()}
    assert rows["port"] == rows["max_concurrent_envs"] == rows["workers"] == "default"


def test_flag_beats_env_beats_manifest(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORT", "9001")
    monkeypatch.setenv("WORKERS", "3")
    plan = plan_serve(project, flags={"workers": 8})
    assert (plan.settings.port, plan.resolved.origin("port").source) == (9001, "env")
    assert (plan.settings.workers, str(plan.resolved.origin("workers"))) == (8, "--workers")
    assert plan.total_capacity == 8 * plan.settings.max_concurrent_envs


def test_bad_environment_value_is_a_usage_error(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKERS", "many")
    with pytest.raises(UsageError, match="WORKERS"):
        plan_serve(project)


def test_reload_with_workers_is_refused(project: Path) -> None:
    with pytest.raises(UsageError, match="--reload"):
        plan_serve(project, reload=True, flags={"workers": 2})


def test_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(OpenEnvError, match=r"openenv\.yaml"):
        plan_serve(tmp_path)


def test_port_in_use_is_one_clear_error() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(OpenEnvError, match=f"--port {port + 1}"):
            check_port_free("127.0.0.1", port)


def test_open_file_advice(project: Path) -> None:
    plan = plan_serve(project, flags={"max_concurrent_envs": 5000})
    assert "ulimit" in (open_file_advice(1024, plan) or "")
    assert open_file_advice(1 << 20, plan) is None
