"""Rendering the project `openenv import FAMILY:NAME` writes (pure: no library imported here)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest
import yaml

from openenv_cli.manifest import parse_manifest
from openenv_cli.scaffold import FamilyFacts, family_project_name, render_family_project

FACTS = FamilyFacts(
    target="reasoning_gym:leg_counting?size=5&seed=3",
    family="reasoning_gym",
    extra="reasoning-gym",
    package="reasoning-gym",
    package_version="0.1.25",
    description='Counting legs: "how many?"',
    example_action={"answer": "hello", "n": None, "ok": True},
)


@pytest.mark.parametrize(
    ("environment", "name"),
    [
        ("CartPole-v1", "cart_pole_v1"),
        ("leg_counting", "leg_counting"),
        ("GuessTheNumber-v0", "guess_the_number_v0"),
        ("ALE/Pong-v5", "pong_v5"),
        ("2048-v0", ""),  # no letter first: the user passes --name
    ],
)
def test_project_names_come_from_the_environment(environment: str, name: str) -> None:
    assert family_project_name(environment) == name


def test_the_project_is_init_s_with_the_library_in_place_of_the_environment() -> None:
    files = render_family_project("legs", FACTS)
    assert "server/legs_environment.py" not in files
    for path in (
        "models.py",
        "client.py",
        "server/app.py",
        "server/Dockerfile",
        "tests/test_legs.py",
    ):
        assert path in files
    for path, text in files.items():
        if path.endswith(".py"):
            ast.parse(text, path)  # every file compiles
    assert "load_family" in files["models.py"]
    assert '"reasoning_gym:leg_counting?size=5&seed=3"' in files["models.py"]
    assert "from legs.models import ADAPTED" in files["server/app.py"]
    # the test's example is a Python literal, the manifest's a JSON one
    assert "{'answer': 'hello', 'n': None, 'ok': True}" in files["tests/test_legs.py"]


def test_the_manifest_pins_the_library_and_validates(tmp_path: Path) -> None:
    data = yaml.safe_load(render_family_project("legs", FACTS)["openenv.yaml"])
    report = parse_manifest(data, tmp_path)
    assert report.errors == [] and report.warnings == []
    manifest = report.manifest
    assert manifest is not None
    assert manifest.app == "legs.server.app:app"
    assert manifest.family is not None
    assert (manifest.family.target, manifest.family.package, manifest.family.version) == (
        "reasoning_gym:leg_counting?size=5&seed=3",
        "reasoning-gym",
        "0.1.25",
    )
    assert manifest.example_action == {"answer": "hello", "n": None, "ok": True}
    assert manifest.description == 'Counting legs: "how many?"'


def test_pyproject_depends_on_the_runtime_extra_and_pins_the_library() -> None:
    project = tomllib.loads(render_family_project("legs", FACTS)["pyproject.toml"])["project"]
    runtime, library = project["dependencies"]
    assert runtime.startswith("openenv-runtime[reasoning-gym]>=")
    assert library == "reasoning-gym==0.1.25"
    assert project["name"] == "legs"
