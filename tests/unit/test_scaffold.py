"""openenv init: the pure renderer, the command and the licence (names and writing: test_project_names, test_project_writer)."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from openenv_cli.errors import OpenEnvError
from openenv_cli.main import app
from openenv_cli.manifest import parse_manifest
from openenv_cli.scaffold import (
    RUNTIME_REQUIREMENT,
    project_context,
    render_project,
    template_root,
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
    assert any(d.startswith(RUNTIME_REQUIREMENT) for d in deps)
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


@pytest.mark.parametrize(
    "description", ['Ends with "a quote"', "ends with a backslash\\", 'a """ b']
)
def test_a_description_keeps_every_python_file_valid(description: str) -> None:
    files = render_project("my_env", {"description": description})
    for path, text in files.items():
        if path.endswith(".py"):
            ast.parse(text, path)
    assert ast.get_docstring(ast.parse(files["__init__.py"])) == f"My Env: {description}"


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


def test_the_project_serves_itself_three_ways() -> None:
    """`server` / `uv run server`, `python -m NAME.server.app`, `python server/NAME_environment.py`."""
    files = render_project("heron_env")
    scripts = tomllib.loads(files["pyproject.toml"])["project"]["scripts"]
    assert scripts == {"server": "heron_env.server.app:main"}
    app_tree = ast.parse(files["server/app.py"])
    assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in app_tree.body)
    assert 'if __name__ == "__main__":\n    main()' in files["server/app.py"]
    environment = files["server/heron_env_environment.py"]
    assert (
        "from heron_env.server.app import main"
        in environment.split('if __name__ == "__main__":')[1]
    )
