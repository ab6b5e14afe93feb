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
from openenv_runtime.adapters.harbor import HarborAction
from openenv_runtime.adapters.target import FamilyTarget, load_family
from tests.support.harbor_task import INSTRUCTION, make_task
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


def test_a_harbor_task_is_imported_to_run_inside_its_own_image(tmp_path: Path) -> None:
    task = make_task(tmp_path / "hello-task", base_image="openenv-test/python:3.11-slim")
    (task / "environment" / "blob.bin").write_bytes(b"\x00\xff binary")
    # No Docker engine is asked: the project is made from the folder alone.
    files, name = import_project(f"harbor:{task}?warm=3&command_timeout=20")
    assert name == "hello_task"
    copied = {k: v for k, v in files.items() if k.startswith("task/")}
    assert copied == {
        "task/task.toml": (task / "task.toml").read_bytes(),
        "task/instruction.md": INSTRUCTION.encode(),
        "task/environment/Dockerfile": (task / "environment" / "Dockerfile").read_bytes(),
        "task/environment/blob.bin": b"\x00\xff binary",
        "task/tests/test.sh": (task / "tests" / "test.sh").read_bytes(),
    }
    models = files["models.py"]
    assert isinstance(models, str)
    # served by the local executor, the warm pool (a Docker-engine option) left out
    assert "{'command_timeout': '20', 'executor': 'local'}" in models
    manifest = yaml.safe_load(str(files["openenv.yaml"]))
    assert manifest["build"]["base_image"] == "openenv-harbor-task/hello_task:latest"
    assert manifest["family"]["target"] == f"harbor:{task}?warm=3&command_timeout=20"
    dockerfile = str(files["server/Dockerfile"])
    assert "ARG BASE_IMAGE=openenv-harbor-task/hello_task:latest" in dockerfile
    assert "MAX_CONCURRENT_ENVS=1" in dockerfile and "OPENENV_HARBOR_IN_CONTAINER=1" in dockerfile
    lock = json.loads(str(files["openenv.lock.json"]))
    assert "submit" in lock["schemas"]["action"]["properties"]
    assert "builds task/environment/ as openenv-harbor-task/hello_task:latest" in str(
        files["README.md"]
    )


def test_a_harbor_import_outside_its_image_runs_no_command(tmp_path: Path) -> None:
    """`openenv validate` and `openenv serve` of the project on a workstation run the agent's
    commands nowhere: only the image (OPENENV_HARBOR_IN_CONTAINER=1) runs them."""
    task = make_task(tmp_path / "t")
    adapted = load_family(FamilyTarget("harbor", str(task), {"executor": "local"}))
    assert adapted.action_cls is HarborAction
    env = adapted.factory()
    marker = tmp_path / "ran"
    env.reset()
    ran = env.step(HarborAction(command=f"touch {marker}"))
    assert ran.exit_code == 126 and "only inside its image" in ran.stderr
    wrote = env.step(HarborAction(write_path=str(marker), content="x"))
    assert "only inside its image" in (wrote.error or "")
    assert env.step(HarborAction(submit=True)).reward == 0.0
    assert not marker.exists()
