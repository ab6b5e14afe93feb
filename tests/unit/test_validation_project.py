"""validate_project on broken projects (no server): each fails with the file and the fix.

The models and app are imported in a child process, so these tests also prove the project
needs no `pip install` to be validated.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openenv_cli.main import app
from openenv_cli.scaffold import render_project, write_project
from openenv_cli.validation import validate_project
from openenv_cli.validation.results import Status


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    write_project(render_project("my_env"), tmp_path / "my_env")
    return tmp_path / "my_env"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


def check(project: Path, name: str, **kw):
    report = validate_project(project, smoke=False, timeout=kw.pop("timeout", 60), **kw)
    result = report.get(name)
    assert result is not None, [c.name for c in report.checks]
    return report, result


def test_fresh_project_passes_without_smoke(project: Path) -> None:
    report = validate_project(project, smoke=False)
    assert report.ok, [c.message for c in report.checks if c.status is Status.FAIL]
    by_name = {c.name: c.status for c in report.checks}
    assert by_name["models"] is Status.PASS and by_name["app"] is Status.PASS
    assert by_name["example_action"] is Status.PASS and by_name["contract"] is Status.WARN
    assert by_name["smoke"] is Status.SKIP


TOOL_ONLY_ENVIRONMENT = """\
from typing import Any

from openenv_runtime import Environment, State
from openenv_runtime.mcp import CallToolAction, CallToolObservation


class MyEnvironment(Environment[CallToolAction, CallToolObservation, State]):
    def reset(self, **kwargs: Any) -> CallToolObservation:
        return CallToolObservation(tool_name="", result=None)

    def step(self, action: CallToolAction, **kwargs: Any) -> CallToolObservation:
        return CallToolObservation(tool_name=action.tool_name, result=action.arguments)

    @property
    def state(self) -> State:
        return State()
"""

TOOL_ONLY_APP = """\
from openenv_runtime import create_app
from openenv_runtime.mcp import CallToolAction, CallToolObservation

from my_env.server.my_env_environment import MyEnvironment

app = create_app(MyEnvironment, CallToolAction, CallToolObservation)
"""


def test_tool_only_project_without_models_checks_the_apps_classes(project: Path) -> None:
    (project / "models.py").unlink()
    (project / "client.py").unlink()
    (project / "__init__.py").write_text('"""A tool-only environment."""\n')
    (project / "server" / "my_env_environment.py").write_text(TOOL_ONLY_ENVIRONMENT)
    (project / "server" / "app.py").write_text(TOOL_ONLY_APP)
    edit(project / "openenv.yaml", "  message: Hello, world", "  tool_name: echo")
    report, result = check(project, "models")
    assert result.status is Status.PASS and "CallToolAction" in result.message, result.message
    assert report.get("example_action").status is Status.PASS
    assert report.ok, [c.message for c in report.checks if c.status is Status.FAIL]


def test_no_models_and_no_app_fails_on_the_models(project: Path) -> None:
    (project / "models.py").unlink()
    (project / "server" / "app.py").write_text("raise RuntimeError('boom')\n")
    _, result = check(project, "models")
    assert result.status is Status.FAIL and "models" in result.message


def test_project_folder_name_differs_from_package(tmp_path: Path) -> None:
    write_project(render_project("my_env"), tmp_path / "checkout-123")
    assert validate_project(tmp_path / "checkout-123", smoke=False).ok


def test_syntax_error_in_models(project: Path) -> None:
    edit(project / "models.py", "class MyAction(Action):", "class MyAction(Action)")
    report, result = check(project, "models")
    assert not report.ok and result.status is Status.FAIL
    assert (
        result.file == "models.py" and "SyntaxError" in result.message and "line" in result.message
    )
    assert "syntax" in result.fix


def test_missing_dependency(project: Path) -> None:
    edit(
        project / "models.py",
        "from pydantic import Field",
        "from pydantic import Field\nimport not_installed_pkg_xyz",
    )
    _, result = check(project, "models")
    assert result.status is Status.FAIL and result.file == "models.py"
    assert "not_installed_pkg_xyz" in result.message
    assert "pip install not_installed_pkg_xyz" in result.fix and "pyproject.toml" in result.fix


def test_error_in_an_imported_project_file_names_that_file(project: Path) -> None:
    edit(
        project / "client.py",
        "from openenv_runtime import EnvClient",
        "from openenv_runtime import EnvClient\nraise ValueError('bad client')",
    )
    _, result = check(project, "models")
    assert (
        result.status is Status.FAIL
        and result.file == "client.py"
        and "bad client" in result.message
    )


def test_no_action_subclass(project: Path) -> None:
    edit(project / "models.py", "class MyAction(Action):", "class MyAction(BaseModel):")
    edit(
        project / "models.py", "from pydantic import Field", "from pydantic import BaseModel, Field"
    )
    _, result = check(project, "models")
    assert result.status is Status.FAIL and result.file == "models.py"
    assert "MyAction does not derive from openenv_runtime.Action" in result.message
    assert "class MyAction(Action):" in result.fix


def test_no_observation_at_all(project: Path) -> None:
    text = (project / "models.py").read_text()
    start = text.index("class MyObservation")
    end = text.index("class MyState")
    (project / "models.py").write_text(text[:start] + text[end:])
    _, result = check(project, "models")
    # client.py imports the missing class first, and is named as the place to fix
    assert (
        result.status is Status.FAIL
        and "MyObservation" in result.message
        and result.file == "client.py"
    )
    assert "/tmp/openenv-import" not in result.message  # the temporary symlink is not shown


def test_no_observation_subclass_when_nothing_imports_it(project: Path) -> None:
    text = (project / "models.py").read_text()
    (project / "models.py").write_text(
        text.replace("class MyObservation(Observation):", "class MyObservation:")
    )
    _, result = check(project, "models")
    assert result.status is Status.FAIL and "no Observation subclass" in result.message


def test_field_without_json_schema(project: Path) -> None:
    edit(
        project / "models.py",
        "class MyAction(Action):",
        "class Opaque:\n    pass\n\n\nclass MyAction(Action):\n    blob: Opaque = None",
    )
    _, result = check(project, "schemas")
    assert result.status is Status.FAIL and result.file == "models.py" and "JSON" in result.fix


def test_invalid_example_action_in_manifest(project: Path) -> None:
    edit(project / "openenv.yaml", "  message: Hello, world", "  msg: Hello, world")
    _, result = check(project, "example_action")
    assert result.status is Status.FAIL and result.file == "openenv.yaml"
    assert "message: Field required" in result.message and "example_action" in result.fix


def test_example_action_built_from_schema(project: Path) -> None:
    edit(project / "openenv.yaml", "example_action:\n  message: Hello, world\n", "")
    _, result = check(project, "example_action")
    assert result.status is Status.PASS and "built from the action schema" in result.message


def test_app_attribute_missing(project: Path) -> None:
    edit(
        project / "openenv.yaml", "app: my_env.server.app:app", "app: my_env.server.app:application"
    )
    report, result = check(project, "app")
    assert result.status is Status.FAIL and result.file == "server/app.py"
    assert "application" in result.fix
    assert report.get("dockerfile").status is Status.FAIL  # the Dockerfile serves another app now


def test_app_module_missing(project: Path) -> None:
    (project / "server" / "app.py").unlink()
    report, result = check(project, "app")
    assert result.status is Status.FAIL and "my_env.server.app" in result.message
    assert report.get("files").status is Status.FAIL


def test_app_raises_at_import(project: Path) -> None:
    edit(
        project / "server" / "app.py",
        "app = create_app(",
        "raise RuntimeError('no GPU')\napp = create_app(",
    )
    _, result = check(project, "app")
    assert (
        result.status is Status.FAIL
        and result.file == "server/app.py"
        and "no GPU" in result.message
    )


def test_app_is_not_asgi(project: Path) -> None:
    (project / "server" / "app.py").write_text("app = 42\n")
    _, result = check(project, "app")
    assert result.status is Status.FAIL and "not an ASGI app" in result.message


def test_create_app_given_an_instance(project: Path) -> None:
    edit(project / "server" / "app.py", "    MyEnvironment,\n", "    MyEnvironment(),\n")
    _, result = check(project, "app")
    assert result.status is Status.FAIL and "pass the class" in result.message


def test_sys_exit_at_import(project: Path) -> None:
    edit(
        project / "models.py",
        "from pydantic import Field",
        "import sys\nsys.exit(3)\nfrom pydantic import Field",
    )
    _, result = check(project, "models")
    assert result.status is Status.FAIL and "SystemExit" in result.message


def test_slow_import_times_out(project: Path) -> None:
    edit(
        project / "models.py",
        "from pydantic import Field",
        "import time\ntime.sleep(30)\nfrom pydantic import Field",
    )
    _, result = check(project, "models", timeout=3)
    assert (
        result.status is Status.FAIL
        and "longer than 3s" in result.message
        and "--timeout" in result.fix
    )


def test_broken_manifest_skips_the_rest(project: Path) -> None:
    (project / "openenv.yaml").write_text("name: [\n")
    report = validate_project(project)
    assert not report.ok
    assert report.checks[0].name == "manifest" and report.checks[0].status is Status.FAIL
    assert {c.name for c in report.checks if c.status is Status.SKIP} >= {
        "models",
        "smoke",
        "contract",
    }


def test_update_lock_then_breaking_change(project: Path) -> None:
    report = validate_project(project, smoke=False, update_lock=True)
    assert report.ok and (project / "openenv.lock.json").is_file()
    assert validate_project(project, smoke=False).get("contract").status is Status.PASS
    edit(project / "models.py", "    message_length: int = Field(", "    length: int = Field(")
    result = validate_project(project, smoke=False).get("contract")
    assert (
        result.status is Status.FAIL
        and "observation.message_length: field removed (renamed to `length`?)" in result.message
    )


def test_update_lock_when_models_do_not_import(project: Path) -> None:
    (project / "models.py").write_text("this is not python\n")
    result = validate_project(project, smoke=False, update_lock=True).get("contract")
    assert result.status is Status.FAIL and not (project / "openenv.lock.json").exists()


def test_openenv_core_style_project(tmp_path: Path) -> None:
    """A project laid out like openenv-core makes them: app `server.app:app`, models at the root."""
    project = tmp_path / "echo_env"
    (project / "server").mkdir(parents=True)
    (project / "openenv.yaml").write_text(
        "spec_version: 1\nname: echo_env\ntype: space\nruntime: fastapi\napp: server.app:app\nport: 8000\n"
    )
    (project / "pyproject.toml").write_text(
        '[project]\nname = "openenv-echo_env"\nversion = "0.1.0"\ndependencies = ["openenv-runtime"]\n'
    )
    (project / "__init__.py").write_text("")
    (project / "models.py").write_text(
        "from openenv_runtime import Action, Observation\n"
        "class EchoAction(Action):\n    message: str\n"
        "class EchoObservation(Observation):\n    echoed_message: str = ''\n"
    )
    (project / "server" / "__init__.py").write_text("")
    (project / "server" / "app.py").write_text(
        "from openenv_runtime import Environment, State, create_app\n"
        "try:\n    from ..models import EchoAction, EchoObservation\n"
        "except ImportError:\n    from models import EchoAction, EchoObservation\n"
        "class EchoEnvironment(Environment):\n"
        "    def reset(self, **kw):\n        return EchoObservation()\n"
        "    def step(self, action, **kw):\n        return EchoObservation(echoed_message=action.message)\n"
        "    @property\n    def state(self):\n        return State()\n"
        "app = create_app(EchoEnvironment, EchoAction, EchoObservation)\n"
    )
    (project / "server" / "Dockerfile").write_text(
        'FROM x\nCMD ["sh", "-c", "uvicorn server.app:app --host 0.0.0.0"]\n'
    )
    report = validate_project(project, smoke=False)
    assert report.ok, [(c.name, c.message) for c in report.checks if c.status is Status.FAIL]
    assert report.get("manifest").status is Status.PASS


# -- the command ------------------------------------------------------------------------------

runner = CliRunner()


def test_cli_json_output(project: Path) -> None:
    result = runner.invoke(app, ["validate", str(project), "--no-smoke", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is True and data["summary"]["fail"] == 0
    assert {"name", "status", "message", "fix", "file", "details"} <= set(data["checks"][0])


def test_cli_failure_exit_code_and_table(project: Path) -> None:
    (project / "pyproject.toml").unlink()
    result = runner.invoke(app, ["validate", str(project), "--no-smoke"], terminal_width=200)
    assert result.exit_code == 1
    assert (
        "fail" in result.output
        and "pyproject.toml is missing" in result.output
        and "FAILED" in result.output
    )
    result = runner.invoke(app, ["validate", str(project), "--no-smoke", "--json"])
    assert result.exit_code == 1 and json.loads(result.stdout)["ok"] is False


@pytest.mark.parametrize(
    "args",
    [
        ["validate", "/no/such/folder"],
        ["validate", "--url", "ftp://example"],
        ["validate", "--url", "http://127.0.0.1:1", "--update-lock"],
        ["validate", "--timeout", "0"],
        ["validate", "--bogus"],
    ],
)
def test_cli_usage_errors_exit_2(args: list[str]) -> None:
    from openenv_cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2


def test_cli_path_is_a_file(tmp_path: Path) -> None:
    from openenv_cli.main import main

    (tmp_path / "f").write_text("x")
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(tmp_path / "f")])
    assert exc.value.code == 2


INSTALLED_COPY_FINDER = '''
import importlib.machinery, importlib.util, sys


class InstalledCopy:
    """Like an editable install's finder: after the path finder, maps {name} to another copy."""

    def find_spec(self, fullname, path, target=None):
        if fullname.startswith("{name}."):
            where = "{installed}/" + fullname.split(".", 1)[1].replace(".", "/") + ".py"
            return importlib.util.spec_from_file_location(fullname, where)
        return None


sys.meta_path.append(InstalledCopy())
'''


def test_an_installed_copy_of_the_project_is_never_imported_in_its_place(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Quickstart's `pip install -e .` left a copy behind: validate reads the working tree."""
    installed = tmp_path / "installed" / "my_env"
    write_project(render_project("my_env"), installed)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        INSTALLED_COPY_FINDER.replace("{name}", "my_env").replace("{installed}", str(installed))
    )
    monkeypatch.setenv("PYTHONPATH", str(hook))
    (project / "models.py").unlink()
    _, result = check(project, "models")
    assert result.status is Status.FAIL and "models" in result.message, result.message
