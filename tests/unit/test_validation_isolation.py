"""import_layout: how a project that is not pip-installed is imported by serve and validate."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from openenv_cli.validation.isolation import import_layout


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "checkout"
    (project / "server").mkdir(parents=True)
    (project / "__init__.py").write_text("")
    (project / "server" / "__init__.py").write_text("")
    (project / "models.py").write_text("NAME = 'models'\n")
    # the reference environments' fallback import, run from the project folder
    (project / "server" / "app.py").write_text("from models import NAME\napp = NAME\n")
    return project


def _import(env: dict[str, str], cwd: Path, module: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", f"import {module} as m; print(m.app)"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_package_app_path_also_sees_the_project_folder(tmp_path: Path) -> None:
    project = _project(tmp_path)
    with import_layout(project, "my_env", "my_env.server.app") as layout:
        paths = layout.env["PYTHONPATH"].split(os.pathsep)
        assert paths[0] == str(layout.root) and paths[-1] == str(project.resolve())
        done = _import(layout.env, layout.root, "my_env.server.app")
    assert done.returncode == 0 and done.stdout.strip() == "models", done.stderr


def test_reference_app_path_imports_from_the_project_folder(tmp_path: Path) -> None:
    project = _project(tmp_path)
    with import_layout(project, "my_env", "server.app") as layout:
        assert layout.env["PYTHONPATH"].split(os.pathsep).count(str(project.resolve())) == 1
        done = _import(layout.env, layout.root, "server.app")
    assert done.returncode == 0 and done.stdout.strip() == "models", done.stderr
