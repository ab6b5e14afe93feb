"""``openenv migrate``: what it rewrites, what it keeps, what it reports."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from openenv_cli.main import app
from openenv_cli.migrate import (
    apply_migration,
    plan_migration,
    rewrite_manifest,
    rewrite_pyproject,
    rewrite_python,
)

SOURCE = '''"""Docs mention openenv.core.env_server in prose."""
# a comment that stays
from openenv.core.env_server.types import Action,  Observation  # keep this spacing
from openenv.core import EnvClient
import openenv.core.env_server.interfaces as ifaces
from openenv_core.client_types import StepResult
from openenv.auto import AutoEnv
from openenv import AutoAction
from .models import Local
patch_target = "openenv.core.env_client.EnvClient._send"
auto_target = "openenv.auto.auto_env.get_discovery"
from openenv.auto._discovery import get_discovery
x = openenv.core.env_server.types.State
'''


def test_rewrite_python_renames_modules_and_keeps_formatting() -> None:
    new, modules = rewrite_python(SOURCE)
    assert (
        "from openenv_runtime.compat.env_server.types import Action,  Observation  # keep this spacing"
        in new
    )
    assert "from openenv_runtime.compat import EnvClient" in new
    assert "import openenv_runtime.compat.env_server.interfaces as ifaces" in new
    assert "from openenv_runtime.compat.client_types import StepResult" in new
    assert (
        "from openenv_runtime.auto import AutoEnv" in new
        and "from openenv_runtime.compat import AutoAction" in new
        and "from openenv_runtime.auto._discovery import get_discovery" in new
    )
    assert '"openenv_runtime.auto.auto_env.get_discovery"' in new
    assert "from .models import Local" in new and "# a comment that stays" in new
    assert '"openenv_runtime.compat.env_client.EnvClient._send"' in new
    assert "x = openenv_runtime.compat.env_server.types.State" in new
    assert '"""Docs mention openenv.core.env_server in prose."""' in new  # prose is not code
    assert "openenv_runtime.compat.env_server.types" in modules


def test_rewritten_imports_resolve_in_our_runtime() -> None:
    new, _ = rewrite_python(
        SOURCE.replace("from .models import Local\n", "").replace(
            "x = openenv", "x = ifaces and openenv"
        )
    )
    namespace: dict[str, object] = {}
    exec(
        compile(
            new.replace(
                "x = ifaces and openenv_runtime", "import openenv_runtime\nx = openenv_runtime"
            ),
            "m",
            "exec",
        ),
        namespace,
    )
    assert namespace["AutoEnv"].__name__ == "AutoEnv"  # type: ignore[attr-defined]


def test_pyproject_dependency_swapped_with_tomlkit() -> None:
    text = '[project]\nname = "x"\ndependencies = [\n    # core\n    "openenv-core[core]>=0.2.2",\n    "numpy",\n]\n'
    new, notes = rewrite_pyproject(text, uses_mcp=True)
    assert '"openenv-runtime[mcp]"' in new and '"numpy"' in new and "# core" in new and not notes


def test_manifest_app_path_made_importable_from_the_parent() -> None:
    assert "app: echo_env.server.app:app" in rewrite_manifest(
        "name: echo_env\napp: server.app:app\n", "echo_env"
    )
    assert rewrite_manifest("name: e\n", "e").endswith("app: e.server.app:app\n")


def _reference_project(root: Path) -> Path:
    project = root / "demo_env"
    (project / "server").mkdir(parents=True)
    (project / "server" / "app.py").write_text(
        "from openenv.core.env_server.http_server import create_app\nfrom openenv.core.harness import Thing\n"
    )
    (project / "server" / "Dockerfile").write_text(
        "ARG BASE_IMAGE=ghcr.io/meta-pytorch/openenv-base:latest\nRUN uv sync\n"
    )
    (project / "pyproject.toml").write_text(
        '[project]\nname = "demo"\ndependencies = ["openenv>=0.10"]\n'
    )
    return project


def test_plan_writes_nothing_and_apply_writes_the_plan(tmp_path: Path) -> None:
    project = _reference_project(tmp_path)
    before = {p: p.read_text() for p in project.rglob("*") if p.is_file()}
    plan = plan_migration(project, dockerfile_template="FROM python:3.11-slim\n")
    assert {p: p.read_text() for p in project.rglob("*") if p.is_file()} == before
    assert "openenv_runtime.compat.harness does not exist" in " ".join(plan.notes)
    assert "+from openenv_runtime.compat.env_server.http_server import create_app" in plan.diff()
    apply_migration(plan)
    assert (project / "server" / "Dockerfile").read_text() == "FROM python:3.11-slim\n"
    assert "uv sync" in (project / "server" / "Dockerfile.reference").read_text()
    assert "app: demo_env.server.app:app" in (project / "openenv.yaml").read_text()
    assert '"openenv-runtime"' in (project / "pyproject.toml").read_text()


def test_cli_dry_run_prints_the_diff_and_changes_nothing(tmp_path: Path) -> None:
    project = _reference_project(tmp_path)
    original = (project / "server" / "app.py").read_text()
    result = CliRunner().invoke(app, ["migrate", str(project), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "+from openenv_runtime.compat.env_server.http_server import create_app" in result.output
    assert (project / "server" / "app.py").read_text() == original
    result = CliRunner().invoke(app, ["migrate", str(project)])
    assert result.exit_code == 0 and "rewrote server/app.py" in result.output
    assert "openenv.core" not in (project / "server" / "app.py").read_text()


def test_imports_it_cannot_map_are_listed_and_the_docs_spelling_is_mapped(tmp_path: Path) -> None:
    project = _reference_project(tmp_path)
    (project / "train.py").write_text(
        "from openenv.providers import UVProvider, DockerSwarmProvider\n"
        "from openenv.cli.commands import build\n"
        "import openenv.experimental.thing\n"
    )
    plan = plan_migration(project)
    notes = "\n".join(plan.notes)
    assert "train.py: `openenv.providers` is not a module of the reference" in notes
    assert "train.py: `openenv.cli.commands` has no counterpart" in notes
    assert "train.py: `openenv.experimental.thing` has no counterpart" in notes
    assert (
        "+from openenv_runtime.compat.containers.runtime import UVProvider, DockerSwarmProvider"
        in (plan.diff())
    )
    result = CliRunner().invoke(app, ["migrate", str(project), "--dry-run"])
    assert "openenv.cli.commands" in result.output  # listed (on stderr) even in a dry run


def test_dry_run_piped_to_a_file_applies_with_patch(tmp_path: Path) -> None:
    import shutil
    import subprocess

    project = _reference_project(tmp_path)
    long_line = "x = '" + "a" * 150 + "'  # openenv.core keeps this line long\n"
    (project / "server" / "app.py").write_text(
        "from openenv.core import EnvClient\n" + long_line + "y = 1"  # no final newline
    )
    result = CliRunner().invoke(app, ["migrate", str(project), "--dry-run"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    diff = result.stdout
    assert long_line.rstrip("\n") in diff  # not wrapped
    patch = shutil.which("patch")
    git = shutil.which("git")
    if patch is not None:
        done = subprocess.run(
            [patch, "-p1", "--batch"], input=diff, cwd=project, capture_output=True, text=True
        )
    elif git is not None:
        done = subprocess.run(
            [git, "apply", "-"], input=diff, cwd=project, capture_output=True, text=True
        )
    else:
        return
    assert done.returncode == 0, done.stdout + done.stderr
    plan = plan_migration(project)
    assert not any(c.path.name == "app.py" for c in plan.changes)  # already applied
