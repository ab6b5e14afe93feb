"""Import a project that is not pip-installed, in a child process.

A temporary folder holds a symlink ``<package>`` → the project folder and goes first on
``PYTHONPATH``, so ``import my_env.models`` finds the working tree even when the project is
not installed (or an older copy is). The project folder itself follows it on the path, as
in the built image (whose working directory it is) and as the reference runs projects:
``server.app:app`` app paths and the reference environments' ``from models import ...``
fallbacks need it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ImportLayout:
    """How a project is imported: its package name and the child's environment."""

    package: str  # the name its modules are imported under, e.g. my_env
    root: Path  # the temporary folder holding the symlink (also a safe working directory)
    env: dict[str, str]


def package_name(project_dir: Path, name: str, app_module: str) -> tuple[str, bool]:
    """The package to symlink, and whether the project folder must be on the path as well."""
    top = app_module.split(".", 1)[0]
    top_is_inside = (project_dir / top).is_dir() or (project_dir / f"{top}.py").is_file()
    if top_is_inside and top != name:
        return (name if name.isidentifier() else project_dir.name), True
    return top, False


@contextmanager
def import_layout(
    project_dir: Path, name: str, app_module: str, base_env: dict[str, str] | None = None
) -> Iterator[ImportLayout]:
    """Yield the layout for child processes; the temporary folder is removed afterwards."""
    project_dir = project_dir.resolve()
    package, add_root = package_name(project_dir, name, app_module)
    root = Path(tempfile.mkdtemp(prefix="openenv-import-"))
    try:
        if package.isidentifier():
            os.symlink(project_dir, root / package, target_is_directory=True)
        env = dict(os.environ if base_env is None else base_env)
        paths = [str(root)] + ([str(project_dir)] if add_root else [])
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        if not add_root:
            paths.append(str(project_dir))
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONSAFEPATH", None)
        yield ImportLayout(package=package, root=root, env=env)
    finally:
        shutil.rmtree(root, ignore_errors=True)
