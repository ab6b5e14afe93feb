"""Static checks of a project: manifest, files, pyproject.toml, Dockerfile."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv_cli import __version__
from openenv_cli.manifest import inspect_manifest
from openenv_cli.scaffold import render_project, write_project
from openenv_cli.validation import static
from openenv_cli.validation.results import Status


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    write_project(render_project("my_env"), tmp_path / "my_env")
    return tmp_path / "my_env"


def manifest_of(project: Path):
    return inspect_manifest(project).manifest


def statuses(results) -> list[str]:
    return [r.status.value for r in results]


def test_generated_project_passes_static_checks(project: Path) -> None:
    manifest = manifest_of(project)
    results = [
        *static.check_manifest(inspect_manifest(project)),
        *static.check_files(project, manifest),
        *static.check_pyproject(project, manifest),
        *static.check_dockerfile(project, manifest),
    ]
    assert all(r.status is Status.PASS for r in results), [r.message for r in results]


def test_manifest_errors_and_warnings(project: Path) -> None:
    # Without app: the conventional <name>.server.app:app is inferred; the typo still warns.
    (project / "openenv.yaml").write_text("name: my_env\nportt: 1\n")
    results = static.check_manifest(inspect_manifest(project))
    assert statuses(results) == ["pass", "warn"] and "port" in results[1].fix
    (project / "openenv.yaml").write_text("name: my_env\napp: my_env.server.app:app\nportt: 1\n")
    results = static.check_manifest(inspect_manifest(project))
    assert statuses(results) == ["pass", "warn"] and "port" in results[1].fix


def test_manifest_name_not_identifier_warns(project: Path) -> None:
    (project / "openenv.yaml").write_text("name: my-env\napp: my_env.server.app:app\n")
    assert statuses(static.check_manifest(inspect_manifest(project))) == ["pass", "warn"]


def test_missing_app_fails(project: Path) -> None:
    (project / "server" / "app.py").unlink()
    results = static.check_files(project, manifest_of(project))
    assert statuses(results) == ["fail"]
    assert "server/app.py" in results[0].message and results[0].file == "server/app.py"


def test_missing_models_only_warns(project: Path) -> None:
    # Tool-only (MCP) environments have no models.py: the app's classes are checked instead.
    (project / "models.py").unlink()
    results = static.check_files(project, manifest_of(project))
    assert statuses(results) == ["warn"] and "models.py" in results[0].message


def test_missing_recommended_files_warn(project: Path) -> None:
    (project / "README.md").unlink()
    (project / "client.py").unlink()
    results = static.check_files(project, manifest_of(project))
    assert statuses(results) == ["warn"] and "README.md" in results[0].message


def test_app_file_for_reference_layout(tmp_path: Path) -> None:
    (tmp_path / "server").mkdir()
    (tmp_path / "openenv.yaml").write_text("name: echo_env\napp: server.app:app\n")
    assert static.app_file(tmp_path, manifest_of(tmp_path)) == tmp_path / "server" / "app.py"


@pytest.mark.parametrize(
    "text,needle,fix",
    [
        (None, "missing", "pyproject.toml"),
        ("[project\nname=", "does not parse", "TOML"),
        ("[tool.x]\na = 1\n", "no [project] table", "openenv-runtime"),
        (
            '[project]\nname = "x"\ndependencies = ["fastapi"]\n',
            "does not depend on openenv-runtime",
            f"openenv-runtime>={__version__}",
        ),
    ],
)
def test_pyproject_failures(project: Path, text: str | None, needle: str, fix: str) -> None:
    path = project / "pyproject.toml"
    if text is None:
        path.unlink()
    else:
        path.write_text(text)
    results = static.check_pyproject(project, manifest_of(project))
    assert statuses(results) == ["fail"]
    assert (
        needle in results[0].message
        and fix in results[0].fix
        and results[0].file == "pyproject.toml"
    )


def test_pyproject_accepts_openenv_core(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["openenv-core[core]>=0.2"]\n'
    )
    results = static.check_pyproject(project, manifest_of(project))
    assert statuses(results) == ["pass"] and "openenv-core" in results[0].message


def test_pyproject_warns_on_cli_dependency_and_version_drift(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\nversion = "9.9.9"\ndependencies = ["openenv_runtime", "openenv-toolkit"]\n'
    )
    results = static.check_pyproject(project, manifest_of(project))
    assert statuses(results) == ["pass", "warn", "warn"]


def dockerfile(project: Path, text: str):
    (project / "server" / "Dockerfile").write_text(text)
    return static.check_dockerfile(project, manifest_of(project))


def test_dockerfile_missing(project: Path) -> None:
    (project / "server" / "Dockerfile").unlink()
    results = static.check_dockerfile(project, manifest_of(project))
    assert (
        statuses(results) == ["fail"]
        and results[0].file == "server/Dockerfile"
        and "build.dockerfile" in results[0].fix
    )


def test_dockerfile_without_from(project: Path) -> None:
    assert "no FROM" in dockerfile(project, "CMD echo\n")[0].message


def test_dockerfile_without_cmd(project: Path) -> None:
    results = dockerfile(project, "FROM python:3.11-slim\nRUN pip install .\n")
    assert statuses(results) == ["fail"] and "openenv_runtime.serve" in results[0].fix


def test_dockerfile_serving_another_app(project: Path) -> None:
    results = dockerfile(project, 'FROM python:3.11-slim\nCMD ["uvicorn", "other.app:app"]\n')
    assert (
        statuses(results) == ["fail"]
        and "does not serve my_env.server.app:app" in results[0].message
    )


def test_dockerfile_shell_form_with_continuations(project: Path) -> None:
    results = dockerfile(
        project,
        "FROM python:3.11-slim\n# comment\nCMD uvicorn \\\n    my_env.server.app:app \\\n    --port 8000\n",
    )
    assert statuses(results) == ["pass"]


def test_dockerfile_reference_style_command(tmp_path: Path) -> None:
    (tmp_path / "server").mkdir()
    (tmp_path / "openenv.yaml").write_text("name: echo_env\napp: server.app:app\n")
    (tmp_path / "server" / "Dockerfile").write_text(
        'FROM base\nCMD ["sh", "-c", "cd /app/env && uvicorn server.app:app --host 0.0.0.0 --port 8000"]\n'
    )
    assert statuses(static.check_dockerfile(tmp_path, manifest_of(tmp_path))) == ["pass"]


def test_dockerfile_expose_mismatch_warns(project: Path) -> None:
    results = dockerfile(
        project,
        'FROM x\nEXPOSE 9000\nCMD ["python", "-m", "openenv_runtime.serve", "my_env.server.app:app"]\n',
    )
    assert statuses(results) == ["pass", "warn"] and "9000" in results[1].message


def test_dockerfile_path_from_manifest(project: Path) -> None:
    (project / "openenv.yaml").write_text(
        "name: my_env\napp: my_env.server.app:app\nbuild: {dockerfile: Dockerfile.gpu}\n"
    )
    results = static.check_dockerfile(project, manifest_of(project))
    assert statuses(results) == ["fail"] and "Dockerfile.gpu" in results[0].message
