"""``openenv import``: the project of a family target, from the library installed here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from openenv_cli.commands.import_ import import_project
from openenv_cli.errors import UsageError
from openenv_cli.main import app
from tests.support.optional import require


def test_import_records_the_installed_library_and_the_schemas() -> None:
    gymnasium = require("gymnasium")
    files, name = import_project("gymnasium:CartPole-v1")
    assert name == "cart_pole_v1"
    manifest = yaml.safe_load(files["openenv.yaml"])
    assert manifest["family"] == {
        "target": "gymnasium:CartPole-v1",
        "package": "gymnasium",
        "version": gymnasium.__version__,
    }
    assert manifest["example_action"] == {"action": 0}
    assert f'"gymnasium=={gymnasium.__version__}"' in files["pyproject.toml"]
    lock = json.loads(files["openenv.lock.json"])
    assert lock["name"] == "cart_pole_v1"
    assert lock["schemas"]["action"]["properties"]["action"]["maximum"] == 1


def test_name_option_and_a_target_that_is_not_a_family() -> None:
    require("gymnasium")
    assert import_project("gymnasium:CartPole-v1", name="pole")[1] == "pole"
    with pytest.raises(UsageError, match="not a family target"):
        import_project("my_env.server.app:app")
    with pytest.raises(UsageError, match="NoSuchEnv"):
        import_project("gymnasium:NoSuchEnv-v9")


def test_the_command_writes_the_project_into_out(tmp_path: Path) -> None:
    require("gymnasium")
    out = tmp_path / "pole"
    result = CliRunner().invoke(app, ["import", "gymnasium:CartPole-v1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    # the folder is the package: its name is the project's when it is a valid one
    assert yaml.safe_load((out / "openenv.yaml").read_text(encoding="utf-8"))["name"] == "pole"
    assert (out / "tests/test_pole.py").is_file()
    assert not (out / "server/pole_environment.py").exists()
    again = CliRunner().invoke(app, ["import", "gymnasium:CartPole-v1", "--out", str(out)])
    assert isinstance(again.exception, UsageError)  # a non-empty folder needs --force, as init
    other = CliRunner().invoke(
        app, ["import", "gymnasium:CartPole-v1", "-o", str(tmp_path / "x-y")]
    )
    assert other.exit_code == 0, other.output
    assert (tmp_path / "x-y" / "tests/test_cart_pole_v1.py").is_file()  # not a name: the env's


def test_a_harbor_task_is_not_imported_but_served_as_it_is(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="the task folder is the project") as raised:
        import_project(f"harbor:{tmp_path}")
    assert raised.value.hint == f"Serve it as it is: openenv serve harbor:{tmp_path}"
