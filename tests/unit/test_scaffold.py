"""openenv init: name rules, class names, the pure renderer and the atomic writer."""

from __future__ import annotations

import ast
import errno
import os
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.main import app
from openenv_cli.manifest import parse_manifest
from openenv_cli.scaffold import (
    class_names,
    project_context,
    render_project,
    template_root,
    validate_project_name,
    write_project,
)

EXPECTED_FILES = {
    "openenv.yaml",
    "pyproject.toml",
    "README.md",
    ".dockerignore",
    ".gitignore",
    "__init__.py",
    "models.py",
    "client.py",
    "server/__init__.py",
    "server/app.py",
    "server/my_env_environment.py",
    "server/Dockerfile",
    "tests/test_my_env.py",
    "_build/quiet_setuptools.py",
}


# -- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,expected",
    [
        ("my_env", ("MyEnv", "MyAction", "MyObservation", "MyState", "MyEnvironment")),
        ("echo", ("EchoEnv", "EchoAction", "EchoObservation", "EchoState", "EchoEnvironment")),
        (
            "grid_world_env",
            (
                "GridWorldEnv",
                "GridWorldAction",
                "GridWorldObservation",
                "GridWorldState",
                "GridWorldEnvironment",
            ),
        ),
        (
            "chess_environment",
            ("ChessEnv", "ChessAction", "ChessObservation", "ChessState", "ChessEnvironment"),
        ),
        ("env2", ("Env2Env", "Env2Action", "Env2Observation", "Env2State", "Env2Environment")),
    ],
)
def test_class_names(name: str, expected: tuple[str, ...]) -> None:
    names = class_names(name)
    assert (
        names.client,
        names.action,
        names.observation,
        names.state,
        names.environment,
    ) == expected


@pytest.mark.parametrize("name", ["my_env", "echo", "chess2", "a_b_c"])
def test_good_names(name: str) -> None:
    validate_project_name(name)


@pytest.mark.parametrize(
    "name,needle",
    [
        ("", "empty"),
        ("my-env", "not a valid project name"),
        ("2fast", "not a valid project name"),
        ("MyEnv", "not a valid project name"),
        ("_private", "not a valid project name"),
        ("café", "not a valid project name"),
        ("class", "keyword"),
        ("match", "keyword"),
        ("json", "standard library"),
        ("asyncio", "standard library"),
        ("test", "standard library"),
        ("fastapi", "shadow a package"),
        ("pydantic", "shadow a package"),
        ("uvicorn", "shadow a package"),
        ("websockets", "shadow a package"),
        ("openenv", "shadow a package"),
        ("openenv_runtime", "shadow a package"),
        ("tests", "shadow a package"),
        ("my_env_", "not a valid project name"),
        ("a__b", "not a valid project name"),
        ("x" * 65, "not a valid project name"),
        ("env", "shadow a package"),
        ("a/b", "contains a path"),
        ("../up", "contains a path"),
        ("..", "contains a path"),
    ],
)
def test_bad_names(name: str, needle: str) -> None:
    with pytest.raises(UsageError) as exc:
        validate_project_name(name)
    assert needle in exc.value.message
    assert exc.value.hint  # always says what to do


@pytest.mark.parametrize(
    "name,suggested",
    [
        ("My-Env", "my_env"),
        ("my_env_", "my_env"),
        ("a__b", "a_b"),
        ("env", "my_env"),
        ("environment", "my_environment"),
        ("test", "test_env"),
        ("json", "json_env"),
        ("class", "class_env"),
        ("2fast", "env_2fast"),
        ("_", "my_env"),
        ("x" * 70, "x" * 64),
    ],
)
def test_bad_name_hint_suggests_a_valid_name(name: str, suggested: str) -> None:
    with pytest.raises(UsageError) as exc:
        validate_project_name(name)
    assert exc.value.hint is not None
    suggestion = exc.value.hint.split("`openenv init ")[1].rstrip("`.")
    assert suggestion == suggested
    validate_project_name(suggestion)  # never a suggestion that is refused in turn


# -- rendering --------------------------------------------------------------------------------


def test_render_produces_the_project() -> None:
    files = render_project("my_env")
    assert set(files) == EXPECTED_FILES
    assert all(text.endswith("\n") for text in files.values())
    assert not any("{{" in path or path.endswith(".jinja") for path in files)


def test_render_is_pure_and_deterministic(tmp_path: Path) -> None:
    before = set(tmp_path.iterdir())
    assert render_project("my_env") == render_project("my_env")
    assert set(tmp_path.iterdir()) == before


def test_python_files_compile_and_use_absolute_imports() -> None:
    files = render_project("my_env")
    for path, text in files.items():
        if path.endswith(".py"):
            tree = ast.parse(text, filename=path)
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):
                    assert node.level == 0, f"{path} uses a relative import"


def test_generated_names_appear_in_code() -> None:
    files = render_project("my_env")
    assert "class MyAction(Action)" in files["models.py"]
    assert "class MyObservation(Observation)" in files["models.py"]
    assert "class MyState(State)" in files["models.py"]
    assert "class MyEnv(EnvClient[MyAction, MyObservation, MyState])" in files["client.py"]
    assert "class MyEnvironment(Environment[" in files["server/my_env_environment.py"]
    assert "SUPPORTS_CONCURRENT_SESSIONS = True" in files["server/my_env_environment.py"]
    assert "MAX_CONCURRENT_ENVS" in files["server/app.py"]
    assert "from my_env.models import MyAction" in files["tests/test_my_env.py"]
    assert "running_server" in files["tests/test_my_env.py"]


def test_manifest_is_valid_and_complete(tmp_path: Path) -> None:
    data = yaml.safe_load(render_project("my_env")["openenv.yaml"])
    report = parse_manifest(data, tmp_path)
    assert report.errors == [] and report.warnings == []
    manifest = report.manifest
    assert (
        manifest.name == "my_env"
        and manifest.app == "my_env.server.app:app"
        and manifest.port == 8000
    )
    assert manifest.example_action == {"message": "Hello, world"}
    assert manifest.build.dockerfile == "server/Dockerfile"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib")
def test_pyproject_makes_the_folder_the_package() -> None:
    data = tomllib.loads(render_project("my_env")["pyproject.toml"])
    assert data["project"]["name"] == "my_env"
    deps = data["project"]["dependencies"]
    assert any(d.startswith("openenv-runtime>=0.1.0") for d in deps)
    assert not any("toolkit" in d for d in deps)
    assert data["tool"]["setuptools"]["package-dir"] == {"my_env": "."}
    assert "my_env.server" in data["tool"]["setuptools"]["packages"]


def test_dockerfile() -> None:
    text = render_project("my_env")["server/Dockerfile"]
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines[0] == "ARG BASE_IMAGE=python:3.11-slim"
    assert lines[1] == "FROM ${BASE_IMAGE}"
    assert "USER user" in lines and "EXPOSE 8000" in lines
    assert "HEALTHCHECK" in text and "/health" in text and "urllib" in text and "curl" not in text
    assert "org.opencontainers.image.title" in text
    assert "_openenv_runtime/" in text
    assert "pip install ." in text
    assert lines[-1] == 'CMD ["python", "-m", "openenv_runtime.serve", "my_env.server.app:app"]'
    assert "HOST=0.0.0.0" in text


def test_readme_front_matter_and_sections() -> None:
    text = render_project("my_env")["README.md"]
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["sdk"] == "docker" and front["app_port"] == 8000 and front["tags"] == ["openenv"]
    assert front["pinned"] is False and front["base_path"] == "/web"
    assert {"title", "emoji", "colorFrom", "colorTo"} <= set(front)
    for section in (
        "## Quick start",
        "## Build",
        "## Deploy",
        "## Reference",
        "## Concurrent sessions",
        "## Development",
        "## Project layout",
    ):
        assert section in text


def test_ignore_files() -> None:
    files = render_project("my_env")
    assert "_openenv_runtime/" in files[".gitignore"]
    assert "_openenv_runtime" not in files[".dockerignore"]
    assert ".git" in files[".dockerignore"].split()


def test_description_with_quotes_stays_valid(tmp_path: Path) -> None:
    files = render_project("my_env", {"description": 'It said "hi": ok\\'})
    assert yaml.safe_load(files["openenv.yaml"])["description"] == 'It said "hi": ok\\'
    assert tomllib.loads(files["pyproject.toml"])["project"]["description"] == 'It said "hi": ok\\'
    ast.parse(files["server/app.py"])


def test_strict_undefined_and_templated_names(tmp_path: Path) -> None:
    root = tmp_path / "templates"
    (root / "project" / "{{name}}_dir").mkdir(parents=True)
    (root / "project" / "{{name}}_dir" / "x.txt.jinja").write_text("{{ name }}\n", encoding="utf-8")
    assert render_project("abc", root=root) == {"abc_dir/x.txt": "abc\n"}
    (root / "project" / "bad.jinja").write_text("{{ nope }}", encoding="utf-8")
    with pytest.raises(OpenEnvError):
        render_project("abc", root=root)


def test_context_overrides() -> None:
    context = project_context("my_env", version="2.0.0")
    assert context["version"] == "2.0.0" and context["classes"]["client"] == "MyEnv"


def test_templates_found_in_checkout() -> None:
    assert (template_root() / "project" / "openenv.yaml.jinja").is_file()


# -- writing ----------------------------------------------------------------------------------


def test_write_creates_everything(tmp_path: Path) -> None:
    files = render_project("my_env")
    written = write_project(files, tmp_path / "my_env")
    assert {p.relative_to(tmp_path / "my_env").as_posix() for p in written} == EXPECTED_FILES
    assert (tmp_path / "my_env" / "server" / "app.py").read_text() == files["server/app.py"]
    assert [p.name for p in tmp_path.iterdir()] == ["my_env"]  # no temp folder left
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "my_env").stat().st_mode & 0o777 == 0o777 & ~umask  # not mkdtemp's 0700


def test_write_creates_missing_parents(tmp_path: Path) -> None:
    write_project({"a.txt": "a\n"}, tmp_path / "x" / "y" / "proj")
    assert (tmp_path / "x" / "y" / "proj" / "a.txt").is_file()


def test_write_into_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    write_project({"a.txt": "a\n"}, tmp_path / "proj")
    assert (tmp_path / "proj" / "a.txt").read_text() == "a\n"


def test_non_empty_folder_needs_force(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "keep.txt").write_text("mine")
    with pytest.raises(UsageError) as exc:
        write_project({"a.txt": "a\n"}, tmp_path / "proj")
    assert "--force" in exc.value.hint
    assert sorted(p.name for p in (tmp_path / "proj").iterdir()) == ["keep.txt"]


def test_force_overwrites_generated_files_and_keeps_others(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    (project / "keep.txt").write_text("mine")
    (project / "sub" / "a.txt").write_text("old")
    write_project({"sub/a.txt": "new\n", "b/c.txt": "c\n"}, project, force=True)
    assert (project / "keep.txt").read_text() == "mine"
    assert (project / "sub" / "a.txt").read_text() == "new\n"
    assert (project / "b" / "c.txt").read_text() == "c\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]


def test_failure_half_way_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = Path.write_text
    calls = {"n": 0}

    def flaky(self: Path, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", flaky)
    with pytest.raises(OpenEnvError) as exc:
        write_project(render_project("my_env"), tmp_path / "deep" / "my_env")
    assert exc.value.exit_code == 1 and "Nothing was written" in exc.value.message
    assert list(tmp_path.iterdir()) == []


def test_failure_during_forced_merge_restores_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "a.txt").write_text("old a")
    (project / "b.txt").write_text("old b")
    real_replace = os.replace
    calls = {"n": 0}

    def flaky(src, dst):
        calls["n"] += 1
        if calls["n"] == 4:  # a's backup, a placed, b's backup, then b fails
            raise OSError(errno.EIO, "I/O error")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(OpenEnvError):
        write_project({"a.txt": "new a", "b.txt": "new b", "c/d.txt": "d"}, project, force=True)
    monkeypatch.setattr(os, "replace", real_replace)
    assert (project / "a.txt").read_text() == "old a"
    assert (project / "b.txt").read_text() == "old b"
    assert sorted(p.name for p in project.iterdir()) == ["a.txt", "b.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]


def test_destination_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "proj").write_text("x")
    with pytest.raises(UsageError):
        write_project({"a.txt": "a"}, tmp_path / "proj")


def test_parent_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError) as exc:
        write_project({"a.txt": "a"}, tmp_path / "file" / "proj")
    assert "not a folder" in exc.value.message


def test_unwritable_parent_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "access", lambda *a, **k: False)
    with pytest.raises(UsageError) as exc:
        write_project({"a.txt": "a"}, tmp_path / "proj")
    assert "permission denied" in exc.value.message
    assert list(tmp_path.iterdir()) == []


def test_permission_error_while_writing_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", denied)
    with pytest.raises(UsageError):
        write_project({"a.txt": "a"}, tmp_path / "new" / "proj")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() == 0, reason="root ignores folder permissions"
)
def test_really_unwritable_folder(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        with pytest.raises(UsageError):
            write_project({"a.txt": "a"}, locked / "proj")
    finally:
        locked.chmod(0o755)


# -- the command ------------------------------------------------------------------------------

runner = CliRunner()


def test_init_command_creates_project(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", "my_env", "--output-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert {
        p.relative_to(tmp_path / "my_env").as_posix()
        for p in (tmp_path / "my_env").rglob("*")
        if p.is_file()
    } == EXPECTED_FILES | {"LICENSE"}
    assert "MyEnvironment" in result.output and 'pip install -e ".[test]"' in result.output


def test_init_description_option(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", "my_env", "-o", str(tmp_path), "-d", "Plays\nchess"])
    assert result.exit_code == 0
    assert (
        yaml.safe_load((tmp_path / "my_env" / "openenv.yaml").read_text())["description"]
        == "Plays chess"
    )


@pytest.mark.parametrize("name", ["json", "my-env", "class", "fastapi", "a/b", "3d"])
def test_init_bad_name_writes_nothing(tmp_path: Path, name: str) -> None:
    from openenv_cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["init", name, "--output-dir", str(tmp_path)])
    assert exc.value.code == 2
    assert list(tmp_path.iterdir()) == []


def test_init_existing_folder(tmp_path: Path) -> None:
    from openenv_cli.main import main

    (tmp_path / "my_env").mkdir()
    (tmp_path / "my_env" / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit) as exc:
        main(["init", "my_env", "-o", str(tmp_path)])
    assert exc.value.code == 2
    assert [p.name for p in (tmp_path / "my_env").iterdir()] == ["notes.txt"]
    result = runner.invoke(app, ["init", "my_env", "-o", str(tmp_path), "--force"])
    assert result.exit_code == 0
    assert (tmp_path / "my_env" / "notes.txt").read_text() == "mine"
    assert (tmp_path / "my_env" / "models.py").is_file()


def test_init_help_documents_the_env_suffix_rule() -> None:
    result = runner.invoke(app, ["init", "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "_env" in result.output and "MyEnvironment" in result.output


# -- the licence ------------------------------------------------------------------------------


def _pyproject(project: Path) -> dict[str, Any]:
    return tomllib.loads((project / "pyproject.toml").read_text())["project"]


def test_default_licence_is_bsd_3_clause_with_its_text(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", "my_env", "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    project = _pyproject(tmp_path / "my_env")
    assert project["license"] == "BSD-3-Clause" and project["license-files"] == ["LICENSE"]
    text = (tmp_path / "my_env" / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License") and "the My Env authors" in text
    assert "BSD-3-Clause" in runner.invoke(app, ["init", "--help"]).output  # the default shown


@pytest.mark.parametrize(
    "given,spdx,first_line",
    [
        ("mit", "MIT", "MIT License"),
        ("ISC", "ISC", "ISC License"),
        ("bsd-2-clause", "BSD-2-Clause", "BSD 2-Clause License"),
    ],
)
def test_licence_with_text(tmp_path: Path, given: str, spdx: str, first_line: str) -> None:
    result = runner.invoke(app, ["init", "my_env", "-o", str(tmp_path), "--license", given])
    assert result.exit_code == 0, result.output
    assert _pyproject(tmp_path / "my_env")["license"] == spdx
    assert (tmp_path / "my_env" / "LICENSE").read_text().splitlines()[0] == first_line


def test_other_spdx_licence_sets_the_field_and_says_to_add_the_text(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", "my_env", "-o", str(tmp_path), "-l", "apache-2.0"])
    assert result.exit_code == 0, result.output
    project = _pyproject(tmp_path / "my_env")
    assert project["license"] == "Apache-2.0" and "license-files" not in project
    assert not (tmp_path / "my_env" / "LICENSE").exists()
    assert "add its text as LICENSE" in " ".join(result.output.split())


def test_no_licence(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", "my_env", "-o", str(tmp_path), "-l", "none"])
    assert result.exit_code == 0, result.output
    assert "license" not in _pyproject(tmp_path / "my_env")
    assert not (tmp_path / "my_env" / "LICENSE").exists()


def test_unknown_licence_is_a_usage_error_and_writes_nothing(tmp_path: Path) -> None:
    from openenv_cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["init", "my_env", "-o", str(tmp_path), "--license", "not-a-licence"])
    assert exc.value.code == 2
    assert list(tmp_path.iterdir()) == []


def test_generated_project_has_pytest_only_as_a_test_extra() -> None:
    project = tomllib.loads(render_project("my_env")["pyproject.toml"])["project"]
    assert not any(d.startswith("pytest") for d in project["dependencies"])
    assert project["optional-dependencies"]["test"] == ["pytest>=8"]
    assert project["requires-python"] == ">=3.10"
