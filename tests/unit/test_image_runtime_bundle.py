"""openenv_cli.image.runtime_bundle: the runtime every context carries."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

import openenv_runtime
from openenv_cli.image.runtime_bundle import (
    runtime_version,
    split_requirements,
    write_runtime_bundle,
)
from openenv_cli.image.selection import RUNTIME_DIR


def _touch(root: Path, *paths: str) -> None:
    for relative in paths:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"content of {relative}\n")


# -- the runtime bundle ---------------------------------------------------------------------


def test_runtime_bundle_is_the_installed_package(tmp_path: Path) -> None:
    bundle = write_runtime_bundle(tmp_path)
    assert bundle == tmp_path / RUNTIME_DIR
    source = Path(openenv_runtime.__file__).resolve().parent
    expected = {
        p.relative_to(source).as_posix()
        for p in source.rglob("*")
        if p.is_file()
        and "__pycache__" not in p.parts
        and p.suffix not in {".pyc", ".pyo"}
        and not p.name.startswith(".")
    }
    copied = {
        p.relative_to(bundle / "openenv_runtime").as_posix()
        for p in (bundle / "openenv_runtime").rglob("*")
        if p.is_file()
    }
    assert copied == expected
    for relative in expected:
        assert (bundle / "openenv_runtime" / relative).read_bytes() == (
            source / relative
        ).read_bytes()


def test_runtime_bundle_pyproject(tmp_path: Path) -> None:
    bundle = write_runtime_bundle(tmp_path)
    data = tomllib.loads((bundle / "pyproject.toml").read_text())
    project = data["project"]
    assert project["name"] == "openenv-runtime"
    assert project["version"] == runtime_version() == openenv_runtime.__version__
    declared = [Requirement(r) for r in metadata.requires("openenv-runtime") or []]
    plain = sorted(str(r) for r in declared if r.marker is None or "extra" not in str(r.marker))
    assert sorted(str(Requirement(r)) for r in project["dependencies"]) == plain
    assert data["build-system"]["build-backend"] == "setuptools.build_meta"
    packages = set(data["tool"]["setuptools"]["packages"])
    assert "openenv_runtime" in packages
    for package in packages:
        assert (bundle / package.replace(".", "/") / "__init__.py").is_file()
    for package, files in data["tool"]["setuptools"].get("package-data", {}).items():
        for name in files:
            assert (bundle / package.replace(".", "/") / name).is_file()


def test_runtime_bundle_replaces_an_old_one(tmp_path: Path) -> None:
    _touch(tmp_path, f"{RUNTIME_DIR}/stale.py")
    write_runtime_bundle(tmp_path)
    assert not (tmp_path / RUNTIME_DIR / "stale.py").exists()


def test_runtime_bundle_is_deterministic(tmp_path: Path) -> None:
    first, second = write_runtime_bundle(tmp_path / "a"), write_runtime_bundle(tmp_path / "b")
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert all((first / f).read_bytes() == (second / f).read_bytes() for f in files)


def test_split_requirements_moves_extras() -> None:
    plain, extras = split_requirements(
        [
            "fastapi>=0.110",
            'uvicorn[standard]>=0.30; python_version >= "3.10"',
            'pytest>=8; extra == "test"',
            "rich; (sys_platform == 'linux') and extra == 'cli'",
            "docker>=7; extra == 'docker' or extra == 'all'",
        ]
    )
    # packaging normalises the requirements; each keeps its whole marker.
    assert plain == ["fastapi>=0.110", 'uvicorn[standard]>=0.30; python_version >= "3.10"']
    assert extras == {
        "test": ['pytest>=8; extra == "test"'],
        "cli": ['rich; sys_platform == "linux" and extra == "cli"'],
        "docker": ['docker>=7; extra == "docker" or extra == "all"'],
        "all": ['docker>=7; extra == "docker" or extra == "all"'],
    }
