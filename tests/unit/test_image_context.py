"""openenv_cli.image.context: staging a context folder for build and push."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv_cli.errors import OpenEnvError
from openenv_cli.image.context import stage_context
from openenv_cli.image.runtime_bundle import runtime_version
from openenv_cli.image.selection import RUNTIME_DIR
from openenv_cli.scaffold import render_project

NEW = "ghcr.io/acme/py:3.12"


def _touch(root: Path, *paths: str) -> None:
    for relative in paths:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"content of {relative}\n")


# -- stage_context() --------------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "my_env"
    for relative, text in render_project("my_env").items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _touch(root, ".env", ".git/config", "__pycache__/x.pyc")
    return root


def test_stage_for_a_build(project: Path, tmp_path: Path) -> None:
    staged = stage_context(project, tmp_path / "ctx")
    assert staged.root == (tmp_path / "ctx").resolve()
    assert staged.dockerfile == "server/Dockerfile"
    assert "Dockerfile" not in staged.files
    assert staged.dockerfile_text == (project / "server/Dockerfile").read_text()
    assert f"{RUNTIME_DIR}/pyproject.toml" in staged.files
    assert f"{RUNTIME_DIR}/openenv_runtime/__init__.py" in staged.files
    assert staged.runtime_version == runtime_version()
    assert not any(f.startswith((".git/", "__pycache__/")) or f == ".env" for f in staged.files)
    on_disk = sorted(
        p.relative_to(staged.root).as_posix() for p in staged.root.rglob("*") if p.is_file()
    )
    assert list(staged.files) == on_disk


def test_stage_for_a_space_with_a_base_image(project: Path, tmp_path: Path) -> None:
    staged = stage_context(
        project, tmp_path / "space", base_image=NEW, dockerfile_at_root=True, excludes=["tests/"]
    )
    assert staged.dockerfile == "Dockerfile"
    root_text = (staged.root / "Dockerfile").read_text()
    assert root_text == staged.dockerfile_text == (staged.root / "server/Dockerfile").read_text()
    assert f"ARG BASE_IMAGE={NEW}" in root_text
    assert (project / "server/Dockerfile").read_text() != root_text  # the project is untouched


def test_stage_keeps_an_ignored_dockerfile(project: Path, tmp_path: Path) -> None:
    (project / ".dockerignore").write_text("server/Dockerfile\n")
    staged = stage_context(project, tmp_path / "ctx")
    assert "server/Dockerfile" in staged.files


def test_stage_into_a_folder_inside_the_project(project: Path) -> None:
    staged = stage_context(project, project / ".staging")
    assert not any(f.startswith(".staging") for f in staged.files)


def test_stage_errors(project: Path, tmp_path: Path) -> None:
    with pytest.raises(OpenEnvError, match="No Dockerfile at docker/Dockerfile"):
        stage_context(project, tmp_path / "a", dockerfile="docker/Dockerfile")
    with pytest.raises(OpenEnvError, match="outside the project"):
        stage_context(project, tmp_path / "b", dockerfile="../Dockerfile")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(OpenEnvError, match="not empty"):
        stage_context(project, tmp_path / "full")
    (project / "server/Dockerfile").write_text("# empty\n")
    with pytest.raises(OpenEnvError, match="no FROM"):
        stage_context(project, tmp_path / "c", base_image=NEW)
