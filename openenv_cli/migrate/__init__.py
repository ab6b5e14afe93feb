"""``openenv migrate``: rewrite a project written for the reference OpenEnv to run on ours.

Pure planning: :func:`plan_migration` reads a project and returns the new text of every
file it would change, with notes on what it could not translate; :func:`apply_migration`
writes them. What changes:

* Python imports (and dotted references, and ``"openenv.core..."`` strings such as
  ``mock.patch`` targets): ``openenv.core`` / ``openenv_core`` → ``openenv_runtime.compat``
  (the reference's tree, path for path), ``openenv.auto`` → ``openenv_runtime.auto``,
  ``from openenv import AutoEnv`` → ``from openenv_runtime.compat import AutoEnv``.
  Rewritten with libcst, so formatting and comments stay as they were.
* ``pyproject.toml``: the ``openenv-core`` / ``openenv`` dependency becomes
  ``openenv-runtime`` (``[mcp]`` when the project uses FastMCP); edited with tomlkit.
* ``openenv.yaml``: ``app: server.app:app`` becomes ``<name>.server.app:app`` (the project
  folder is the package, as ``openenv serve`` imports it).
* ``server/Dockerfile``: the reference base image and ``uv sync`` install lines are
  replaced by this project's Dockerfile (the original is kept as ``Dockerfile.reference``).
"""

from __future__ import annotations

from .plan import (
    REFERENCE_DISTS,
    RUNTIME_DIST,
    SKIP_DIRS,
    FileChange,
    MigrationPlan,
    apply_migration,
    plan_migration,
    rewrite_manifest,
    rewrite_pyproject,
)
from .python_imports import (
    ALSO_RENAMED,
    COMPAT,
    MAX_NESTING,
    RUNTIME,
    NotRewritable,
    rewrite_python,
    rewrite_python_report,
)

__all__ = [
    "ALSO_RENAMED",
    "COMPAT",
    "MAX_NESTING",
    "REFERENCE_DISTS",
    "RUNTIME",
    "RUNTIME_DIST",
    "SKIP_DIRS",
    "FileChange",
    "MigrationPlan",
    "NotRewritable",
    "apply_migration",
    "plan_migration",
    "rewrite_manifest",
    "rewrite_pyproject",
    "rewrite_python",
    "rewrite_python_report",
]
