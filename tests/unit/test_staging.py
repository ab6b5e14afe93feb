"""openenv_cli.staging: the ship list, the runtime bundle, --base-image rewriting, stage()."""

from __future__ import annotations

import os
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import openenv_runtime
from openenv_cli.errors import OpenEnvError
from openenv_cli.scaffold import render_project
from openenv_cli.staging import (
    RUNTIME_DIR,
    _split_requirements,
    dockerfile_stages,
    project_files,
    runtime_version,
    set_base_image,
    stage,
    write_runtime_bundle,
)

NEW = "ghcr.io/acme/py:3.12"


# -- set_base_image -------------------------------------------------------------------------


def test_single_stage_literal_from() -> None:
    text = 'FROM python:3.11-slim\nRUN pip install x\nCMD ["x"]\n'
    assert set_base_image(text, NEW) == f'FROM {NEW}\nRUN pip install x\nCMD ["x"]\n'


def test_lowercase_from_and_tag_digest() -> None:
    text = "from python:3.11-slim@sha256:abc\nrun echo hi\n"
    assert set_base_image(text, NEW) == f"from {NEW}\nrun echo hi\n"


def test_arg_based_dockerfile_changes_the_arg_default() -> None:
    text = "# comment\nARG BASE_IMAGE=python:3.11-slim\nFROM ${BASE_IMAGE}\nRUN echo $BASE_IMAGE\n"
    assert (
        set_base_image(text, NEW)
        == f"# comment\nARG BASE_IMAGE={NEW}\nFROM ${{BASE_IMAGE}}\nRUN echo $BASE_IMAGE\n"
    )


def test_arg_without_default_or_quoted_or_among_others() -> None:
    assert (
        set_base_image("ARG BASE_IMAGE\nFROM $BASE_IMAGE\n", NEW)
        == f"ARG BASE_IMAGE={NEW}\nFROM $BASE_IMAGE\n"
    )
    assert (
        set_base_image('ARG BASE_IMAGE="python:3.11"\nFROM ${BASE_IMAGE}\n', NEW)
        == f"ARG BASE_IMAGE={NEW}\nFROM ${{BASE_IMAGE}}\n"
    )
    text = "ARG PY=3.11 BASE_IMAGE=python:3.11 BASE_IMAGE_TAG=x\nFROM ${BASE_IMAGE}\n"
    assert (
        set_base_image(text, NEW)
        == f"ARG PY=3.11 BASE_IMAGE={NEW} BASE_IMAGE_TAG=x\nFROM ${{BASE_IMAGE}}\n"
    )


def test_arg_path_also_moves_literal_froms_of_the_old_default() -> None:
    text = (
        "ARG BASE_IMAGE=python:3.11-slim\n"
        "FROM ${BASE_IMAGE} AS builder\nRUN build\n"
        "FROM python:3.11-slim\nCOPY --from=builder /w /w\n"
    )
    assert set_base_image(text, NEW) == (
        f"ARG BASE_IMAGE={NEW}\nFROM ${{BASE_IMAGE}} AS builder\nRUN build\nFROM {NEW}\nCOPY --from=builder /w /w\n"
    )


def test_unused_global_arg_falls_back_to_the_from_lines() -> None:
    text = "ARG BASE_IMAGE=python:3.11\nFROM python:3.11-slim\n"
    assert set_base_image(text, NEW) == f"ARG BASE_IMAGE=python:3.11\nFROM {NEW}\n"


def test_the_template_dockerfile() -> None:
    text = render_project("my_env")["server/Dockerfile"]
    out = set_base_image(text, NEW)
    assert f"ARG BASE_IMAGE={NEW}\n" in out
    assert "FROM ${BASE_IMAGE}\n" in out
    assert out.replace(NEW, "python:3.11-slim") == text


def test_multi_stage_builder_and_final_on_the_same_base() -> None:
    text = (
        "FROM python:3.11-slim AS builder\n"
        "RUN pip wheel . -w /wheels\n"
        "FROM python:3.11-slim\n"
        "COPY --from=builder /wheels /wheels\n"
    )
    assert set_base_image(text, NEW) == (
        f"FROM {NEW} AS builder\nRUN pip wheel . -w /wheels\nFROM {NEW}\nCOPY --from=builder /wheels /wheels\n"
    )


def test_stage_from_another_image_is_left_alone_whatever_its_position() -> None:
    text = (
        "FROM node:20 AS ui\nRUN npm ci && npm run build\n"
        "FROM python:3.11-slim AS base\nRUN pip install uv\n"
        "FROM base AS final\n"
        "COPY --from=ui /app/dist /static\n"
    )
    out = set_base_image(text, NEW)
    assert out == text.replace("FROM python:3.11-slim AS base", f"FROM {NEW} AS base")
    assert "FROM node:20 AS ui" in out and "FROM base AS final" in out and "COPY --from=ui" in out


def test_from_naming_an_earlier_stage_is_never_rewritten() -> None:
    text = "FROM python:3.11 AS builder\nRUN make\nFROM builder\nRUN test\nFROM BUILDER AS again\n"
    assert (
        set_base_image(text, NEW)
        == f"FROM {NEW} AS builder\nRUN make\nFROM builder\nRUN test\nFROM BUILDER AS again\n"
    )


def test_platform_flag_and_alias_are_kept() -> None:
    text = "FROM --platform=$BUILDPLATFORM python:3.11-slim AS x\nRUN true\nFROM --platform=linux/amd64 python:3.11-slim\n"
    assert set_base_image(text, NEW) == (
        f"FROM --platform=$BUILDPLATFORM {NEW} AS x\nRUN true\nFROM --platform=linux/amd64 {NEW}\n"
    )


def test_continuation_lines_and_comments() -> None:
    text = "# FROM python:3.11 in a comment\nFROM \\\n    python:3.11-slim \\\n    AS app\nRUN echo FROM python:3.11-slim\n"
    out = set_base_image(text, NEW)
    assert (
        out
        == f"# FROM python:3.11 in a comment\nFROM \\\n    {NEW} \\\n    AS app\nRUN echo FROM python:3.11-slim\n"
    )


def test_heredoc_lines_are_not_instructions() -> None:
    text = "FROM python:3.11-slim\nRUN <<EOF\nFROM python:3.11-slim\nEOF\nCOPY <<-'DATA' /x\n\tFROM busybox\n\tDATA\n"
    out = set_base_image(text, NEW)
    assert out.splitlines()[0] == f"FROM {NEW}"
    assert out.splitlines()[2] == "FROM python:3.11-slim"
    assert "\tFROM busybox" in out
    assert len(dockerfile_stages(text)) == 1


def test_final_stage_on_scratch_uses_the_first_external_image() -> None:
    text = "FROM golang:1.22 AS build\nRUN go build\nFROM scratch\nCOPY --from=build /app /app\n"
    assert set_base_image(text, NEW) == text.replace("golang:1.22", NEW)


def test_escape_directive() -> None:
    text = "# escape=`\nFROM `\n  python:3.11-slim\nRUN dir\n"
    assert set_base_image(text, NEW) == f"# escape=`\nFROM `\n  {NEW}\nRUN dir\n"


def test_crlf_line_endings_survive() -> None:
    text = "FROM python:3.11-slim AS a\r\nRUN x\r\n"
    assert set_base_image(text, NEW) == f"FROM {NEW} AS a\r\nRUN x\r\n"


@pytest.mark.parametrize("bad", ["", "  ", "two words"])
def test_bad_image_reference(bad: str) -> None:
    with pytest.raises(ValueError, match="not an image reference"):
        set_base_image("FROM python:3.11\n", bad)


def test_no_from() -> None:
    with pytest.raises(ValueError, match="no FROM"):
        set_base_image("# nothing\nRUN true\n", NEW)


def test_dockerfile_stages() -> None:
    stages = dockerfile_stages("FROM a:1 AS one\nFROM --platform=x b\nfrom one as Two\n")
    assert [(s.image, s.name, s.first_line) for s in stages] == [
        ("a:1", "one", 0),
        ("b", None, 1),
        ("one", "Two", 2),
    ]


# -- project_files --------------------------------------------------------------------------


def _touch(root: Path, *paths: str) -> None:
    for relative in paths:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"content of {relative}\n")


def _names(root: Path, extra: tuple[str, ...] = ()) -> set[str]:
    return {p.as_posix() for p in project_files(root, extra)}


def test_never_shipped(tmp_path: Path) -> None:
    _touch(
        tmp_path,
        "keep.py",
        "server/app.py",
        "server/build/kept.py",
        ".git/HEAD",
        ".env",
        ".env.production",
        ".venv/bin/python",
        "venv/lib/x.py",
        "myenv/pyvenv.cfg",
        "myenv/lib/site.py",
        "server/__pycache__/app.cpython-311.pyc",
        "stray.pyc",
        ".pytest_cache/v",
        ".mypy_cache/x",
        ".ruff_cache/x",
        "ui/node_modules/a/index.js",
        "my_env.egg-info/PKG-INFO",
        "build/lib/x.py",
        "dist/x.whl",
        "uv.lock",
        "poetry.lock",
        "Pipfile.lock",
        "pdm.lock",
        f"{RUNTIME_DIR}/stale.txt",
    )
    assert _names(tmp_path) == {"keep.py", "server/app.py", "server/build/kept.py"}


def test_gitignore_with_negation_and_nested_files(tmp_path: Path) -> None:
    _touch(
        tmp_path,
        "a.log",
        "keep.log",
        "data/x.csv",
        "data/y.csv",
        "sub/local.txt",
        "sub/other.txt",
        "other/local.txt",
    )
    (tmp_path / ".gitignore").write_text("*.log\n!keep.log\ndata/x.csv\n")
    (tmp_path / "sub" / ".gitignore").write_text("local.txt\n")
    assert _names(tmp_path) == {
        ".gitignore",
        "keep.log",
        "data/y.csv",
        "sub/.gitignore",
        "sub/other.txt",
        "other/local.txt",
    }


def test_nested_gitignore_can_re_include(tmp_path: Path) -> None:
    _touch(tmp_path, "sub/a.txt", "sub/b.txt")
    (tmp_path / ".gitignore").write_text("*.txt\n")
    (tmp_path / "sub" / ".gitignore").write_text("!a.txt\n")
    assert _names(tmp_path) == {".gitignore", "sub/.gitignore", "sub/a.txt"}


def test_dockerignore_is_anchored_at_the_root(tmp_path: Path) -> None:
    _touch(
        tmp_path,
        "tests/test_x.py",
        "server/tests/helper.py",
        "docs/a.md",
        "notes.md",
        "server/notes.md",
        "x/cache.pyc",
    )
    (tmp_path / ".dockerignore").write_text("# comment\ntests\n/docs/\n*.md\n!notes.md\n**/*.pyc\n")
    assert _names(tmp_path) == {
        ".dockerignore",
        "server/tests/helper.py",
        "notes.md",
        "server/notes.md",
    }


def test_extra_excludes(tmp_path: Path) -> None:
    _touch(tmp_path, "data/big.bin", "data/small.txt", "a.bin", "deep/x/a.bin", "keep.py")
    assert _names(tmp_path, ("data/", "*.bin")) == {"keep.py"}
    assert _names(tmp_path, ("/a.bin",)) == {
        "data/big.bin",
        "data/small.txt",
        "deep/x/a.bin",
        "keep.py",
    }


def test_always_excluded_cannot_be_reincluded(tmp_path: Path) -> None:
    _touch(tmp_path, ".env", "uv.lock", "x.py")
    (tmp_path / ".gitignore").write_text("!.env\n!uv.lock\n")
    assert _names(tmp_path) == {".gitignore", "x.py"}


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_symlinks(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    _touch(outside, "secret.txt", "file.txt")
    project = tmp_path / "project"
    _touch(project, "x.py")
    (project / "linked_dir").symlink_to(outside, target_is_directory=True)
    (project / "linked_file.txt").symlink_to(outside / "file.txt")
    (project / "dangling").symlink_to(tmp_path / "nope")
    assert _names(project) == {"x.py", "linked_file.txt"}


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
    assert sorted(project["dependencies"]) == sorted(metadata.requires("openenv-runtime") or [])
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
    plain, extras = _split_requirements(
        [
            "fastapi>=0.110",
            'uvicorn[standard]>=0.30; python_version >= "3.10"',
            'pytest>=8; extra == "test"',
            "rich; (sys_platform == 'linux') and extra == 'cli'",
        ]
    )
    assert plain == ["fastapi>=0.110", 'uvicorn[standard]>=0.30; python_version >= "3.10"']
    assert extras == {"test": ["pytest>=8"], "cli": ["rich; (sys_platform == 'linux')"]}


# -- stage() --------------------------------------------------------------------------------


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
    staged = stage(project, tmp_path / "ctx")
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
    staged = stage(
        project, tmp_path / "space", base_image=NEW, dockerfile_at_root=True, excludes=["tests/"]
    )
    assert staged.dockerfile == "Dockerfile"
    root_text = (staged.root / "Dockerfile").read_text()
    assert root_text == staged.dockerfile_text == (staged.root / "server/Dockerfile").read_text()
    assert f"ARG BASE_IMAGE={NEW}" in root_text
    assert (project / "server/Dockerfile").read_text() != root_text  # the project is untouched


def test_stage_keeps_an_ignored_dockerfile(project: Path, tmp_path: Path) -> None:
    (project / ".dockerignore").write_text("server/Dockerfile\n")
    staged = stage(project, tmp_path / "ctx")
    assert "server/Dockerfile" in staged.files


def test_stage_into_a_folder_inside_the_project(project: Path) -> None:
    staged = stage(project, project / ".staging")
    assert not any(f.startswith(".staging") for f in staged.files)


def test_stage_errors(project: Path, tmp_path: Path) -> None:
    with pytest.raises(OpenEnvError, match="No Dockerfile at docker/Dockerfile"):
        stage(project, tmp_path / "a", dockerfile="docker/Dockerfile")
    with pytest.raises(OpenEnvError, match="outside the project"):
        stage(project, tmp_path / "b", dockerfile="../Dockerfile")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(OpenEnvError, match="not empty"):
        stage(project, tmp_path / "full")
    (project / "server/Dockerfile").write_text("# empty\n")
    with pytest.raises(OpenEnvError, match="no FROM"):
        stage(project, tmp_path / "c", base_image=NEW)
