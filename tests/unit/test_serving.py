import os
import sys
from pathlib import Path

import pytest

from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.scaffold import render_project, write_project
from openenv_cli.serving import check_port_free, open_file_advice, plan_serve, workers_advice
from tests.support.optional import require

ENV_VARS = (
    "HOST",
    "PORT",
    "WORKERS",
    "MAX_CONCURRENT_ENVS",
    "SESSION_TIMEOUT",
    "ENABLE_WEB_INTERFACE",
    "OPENENV_SERVER_FLAGS",
    "OPENENV_MANIFEST",
    "OPENENV_INLINE_FRAMES",
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


def test_the_summary_shows_whether_frames_are_answered_below_asgi(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = {name: (value, source) for name, value, source in plan_serve(project).rows()}
    assert rows["inline_frames"] == ("true", "default")
    monkeypatch.setenv("OPENENV_INLINE_FRAMES", "0")
    rows = {name: (value, source) for name, value, source in plan_serve(project).rows()}
    assert rows["inline_frames"] == ("false", "OPENENV_INLINE_FRAMES")


def test_the_summary_shows_the_checkpoint_settings(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHECKPOINT_DIR", "/tmp/checkpoints")
    rows = {name: (value, source) for name, value, source in plan_serve(project).rows()}
    assert rows["checkpoint_dir"] == ("/tmp/checkpoints", "CHECKPOINT_DIR")
    assert rows["max_checkpoints"][1] == "default"
    total, _ = rows["max_checkpoint_total_bytes"]
    assert total.isdigit() and int(total) > 0  # worked out from max_checkpoint_bytes, not "off"


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


def _serve_output(
    project: Path, monkeypatch: pytest.MonkeyPatch, *args: str, target: str | None = None
) -> str:
    """Run `openenv serve` up to the point where uvicorn would start; return what it printed."""
    import sys

    from typer.testing import CliRunner

    import openenv_runtime.serve as runtime_serve
    from openenv_cli import serving
    from openenv_cli.main import app

    monkeypatch.setattr(runtime_serve, "run_server", lambda launch, settings: None)
    monkeypatch.setattr(serving, "check_port_free", lambda host, port: None)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in [m for m in sys.modules if m == project.name or m.startswith(project.name + ".")]:
        monkeypatch.delitem(sys.modules, name)
    result = CliRunner().invoke(
        app, ["serve", target or str(project), *args], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_the_summary_shows_the_capacity_create_app_sets(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app_py = project / "server" / "app.py"
    text = app_py.read_text(encoding="utf-8")
    text = text.replace(
        "from openenv_runtime import create_app\n",
        "from openenv_runtime import create_app\nfrom openenv_runtime.server import ServerSettings\n",
    ).replace("    ),\n)\n", "    ),\n    settings=ServerSettings(max_concurrent_envs=4),\n)\n")
    assert "ServerSettings(max_concurrent_envs=4)" in text
    app_py.write_text(text, encoding="utf-8")
    out = _serve_output(project, monkeypatch)
    assert "capacity   4 sessions (4 per worker × 1 worker; from create_app(settings=...))" in out
    assert "max_concurrent_envs       4 " in out
    assert "overrides" not in out

    out = _serve_output(project, monkeypatch, "--max-concurrent-envs", "7")
    assert "capacity   7 sessions" in out
    assert "--max-concurrent-envs overrides create_app's max_concurrent_envs=4" in out


GUESS = """
from uuid import uuid4
from openenv_runtime import Action, Observation, State, Environment, create_app


class GuessAction(Action):
    guess: int


class GuessObservation(Observation):
    hint: str


class GuessEnvironment(Environment[GuessAction, GuessObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def reset(self, seed=None, episode_id=None, **kwargs) -> GuessObservation:
        self._state = State(episode_id=episode_id or str(uuid4()))
        return GuessObservation(hint="guess 0-9")

    def step(self, action: GuessAction, **kwargs) -> GuessObservation:
        return GuessObservation(hint="no")

    @property
    def state(self) -> State:
        return self._state


app = create_app(GuessEnvironment, GuessAction, GuessObservation, State, env_name="guess")
"""


def test_a_single_file_environment_is_served_as_module_colon_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "single"
    folder.mkdir()
    (folder / "guess_single.py").write_text(GUESS, encoding="utf-8")
    monkeypatch.chdir(folder)
    plan = plan_serve(Path("guess_single:app"))
    assert plan.single_file and plan.manifest.app == "guess_single:app"
    assert plan.project_dir == folder.resolve()
    out = _serve_output(Path("guess_single"), monkeypatch, target="guess_single:app")
    assert "Serving guess_single (guess_single:app)" in out
    assert "from openenv_runtime import GenericEnvClient" in out
    # and as a file path, from anywhere
    monkeypatch.chdir(tmp_path)
    assert plan_serve(Path("single/guess_single.py:app")).project_dir == folder.resolve()
    with pytest.raises(UsageError, match="neither a project folder nor MODULE:APP"):
        plan_serve(Path("not a module:app"))


def test_a_minimal_manifest_gets_the_conventional_app(project: Path) -> None:
    (project / "openenv.yaml").write_text(
        "name: demo_env\nversion: 0.1.0\ndescription: A demo\n", encoding="utf-8"
    )
    assert plan_serve(project).manifest.app == "demo_env.server.app:app"


def test_an_unmigrated_project_is_told_to_run_migrate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util
    import sys

    from openenv_cli.errors import OpenEnvError as Error
    from openenv_cli.serving import check_app_imports

    if importlib.util.find_spec("openenv") is not None:
        pytest.skip("the reference OpenEnv is installed here, so its imports succeed")
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    project = tmp_path / "ref_env"
    (project / "server").mkdir(parents=True)
    (project / "server" / "__init__.py").write_text("")
    (project / "__init__.py").write_text("")
    (project / "server" / "app.py").write_text(
        "from openenv.core.env_server.http_server import create_app\n"
    )
    (project / "openenv.yaml").write_text("name: ref_env\napp: server.app:app\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    plan = plan_serve(project)
    with pytest.raises(Error) as info:
        check_app_imports(plan, [str(project)])
    assert "No module named 'openenv'" in info.value.message
    assert f"openenv migrate {project.resolve()}" in (info.value.hint or "")
    for name in [m for m in sys.modules if m == "server" or m.startswith("server.")]:
        monkeypatch.delitem(sys.modules, name)


def test_a_family_target_is_served_by_its_own_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require("gymnasium")
    from openenv_cli.serving import check_app_imports
    from openenv_runtime.adapters import served

    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(served.FAMILY_TARGET_VARIABLE, "")  # restored (unset) after the test
    monkeypatch.chdir(tmp_path)
    # `gymnasium` is importable, so this is also MODULE:APP: the family wins
    plan = plan_serve(Path("gymnasium:CartPole-v1?max_episode_steps=5"))
    assert plan.manifest.app == served.APP_PATH
    assert plan.manifest.name == "CartPole-v1"
    # the workers find the target in the environment they inherit
    assert os.environ[served.FAMILY_TARGET_VARIABLE] == "gymnasium:CartPole-v1?max_episode_steps=5"
    app = check_app_imports(plan, [])
    assert app.state.openenv_sessions.capacity == plan.settings.max_concurrent_envs


def test_a_family_target_that_cannot_be_served_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openenv_cli.serving import check_app_imports
    from openenv_runtime.adapters import served

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(served.FAMILY_TARGET_VARIABLE, "")
    monkeypatch.setitem(sys.modules, "gymnasium", None)
    with pytest.raises(UsageError, match=r'pip install "openenv-runtime\[gymnasium\]"'):
        plan_serve(Path("gymnasium:CartPole-v1"))
    monkeypatch.delitem(sys.modules, "gymnasium")
    require("gymnasium")
    plan = plan_serve(Path("gymnasium:NoSuchEnv-v0"))
    with pytest.raises(UsageError, match=r"gymnasium.make\('NoSuchEnv-v0'\) failed"):
        check_app_imports(plan, [])


def test_workers_past_the_cores_get_a_hint() -> None:
    hint = workers_advice(8, 2) or ""
    assert "--workers 8" in hint and "2 cores" in hint and "--workers 2" in hint
    assert workers_advice(2, 2) is None and workers_advice(4, None) is None
