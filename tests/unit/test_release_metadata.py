"""One version and one licence for both distributions, checked without building anything
(tests/integration/test_release.py checks the built files)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import openenv_cli
from openenv_cli.main import versions
from openenv_cli.scaffold import RUNTIME_REQUIREMENT

REPO = Path(__file__).resolve().parents[2]


def _pyproject(path: str) -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((REPO / path).read_text())["project"]
    return project


def _runtime_version() -> str:
    text = (REPO / "runtime/openenv_runtime/_version.py").read_text()
    match = re.search(r'__version__\s*=\s*"([^"]+)"', text)
    assert match is not None
    return match.group(1)


def test_both_distributions_take_their_version_from_the_runtime_file() -> None:
    version = _runtime_version()
    toolkit = tomllib.loads((REPO / "pyproject.toml").read_text())
    runtime = tomllib.loads((REPO / "runtime/pyproject.toml").read_text())
    assert toolkit["tool"]["hatch"]["version"]["path"] == "runtime/openenv_runtime/_version.py"
    assert runtime["tool"]["hatch"]["version"]["path"] == "openenv_runtime/_version.py"
    assert "version" in toolkit["project"]["dynamic"] and "version" in runtime["project"]["dynamic"]
    # the CLI runs with exactly the runtime of its own release
    assert f"openenv-runtime=={version}" in toolkit["project"]["dependencies"]
    assert openenv_cli.__version__ == version
    assert f"openenv-runtime>={version}" == RUNTIME_REQUIREMENT


def test_version_names_both_distributions() -> None:
    found = versions()
    assert found["openenv-toolkit"] == _runtime_version()
    assert found["openenv-runtime"] == _runtime_version()


def test_one_licence_file_for_both_and_declared_alike() -> None:
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License")
    assert (REPO / "runtime/LICENSE").read_text() == text  # the runtime's sdist root is runtime/
    for path in ("pyproject.toml", "runtime/pyproject.toml"):
        project = _pyproject(path)
        assert project["license"] == "BSD-3-Clause" and project["license-files"] == ["LICENSE"]


def test_python_versions_declared() -> None:
    assert _pyproject("runtime/pyproject.toml")["requires-python"] == ">=3.10"
    assert _pyproject("pyproject.toml")["requires-python"] == ">=3.11"
