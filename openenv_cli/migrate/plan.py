"""Planning a migration (the new text of every file, and notes) and applying it.

The Python imports are rewritten by :mod:`.python_imports`; ``pyproject.toml``,
``openenv.yaml`` and ``server/Dockerfile`` here.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from tomlkit.exceptions import TOMLKitError

from openenv_cli.errors import OpenEnvError
from openenv_cli.safe_files import UnsafePathError, read_inside, write_inside

from .python_imports import (
    NotRewritable,
    missing_modules,
    rewrite_python_report,
)

RUNTIME_DIST = "openenv-runtime"
REFERENCE_DISTS = frozenset({"openenv-core", "openenv", "openenv_core"})
SKIP_DIRS = frozenset(
    {".git", ".venv", "venv", "__pycache__", "node_modules", ".mypy_cache", "build", "dist"}
)


@dataclass
class FileChange:
    path: Path
    old: str
    new: str

    def diff(self, root: Path) -> str:
        name = self.path.relative_to(root).as_posix()
        lines = difflib.unified_diff(
            self.old.splitlines(keepends=True),
            self.new.splitlines(keepends=True),
            fromfile=f"a/{name}" if self.old else "/dev/null",
            tofile=f"b/{name}",
        )
        # a last line without its newline must say so, or `patch` / `git apply` refuse the diff
        return "".join(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
            for line in lines
        )


@dataclass
class MigrationPlan:
    root: Path
    changes: list[FileChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be translated, and why
    new_files: dict[Path, str] = field(default_factory=dict)

    def diff(self) -> str:
        """Every change and new file as one unified diff (``git apply`` / ``patch -p1``)."""
        created = [FileChange(path, "", text) for path, text in self.new_files.items()]
        return "".join(c.diff(self.root) for c in [*self.changes, *created])


def rewrite_pyproject(text: str, uses_mcp: bool) -> tuple[str, list[str]]:
    """The reference dependency swapped for ``openenv-runtime``; notes for what was left."""
    doc = tomlkit.parse(text)
    notes: list[str] = []
    deps = doc.get("project", {}).get("dependencies")
    if deps is None:
        return text, notes
    wanted = f"{RUNTIME_DIST}[mcp]" if uses_mcp else RUNTIME_DIST
    replaced = False
    for index, item in enumerate(list(deps)):
        try:
            req = Requirement(str(item))
        except InvalidRequirement:
            notes.append(
                f"pyproject.toml: could not read the dependency {item!r}; check it by hand"
            )
            continue
        if req.name.lower().replace("_", "-") in REFERENCE_DISTS:
            marker = f"; {req.marker}" if req.marker else ""
            if replaced:
                deps.remove(item)
            else:
                deps[index] = wanted + marker
                replaced = True
    return tomlkit.dumps(doc), notes


def rewrite_manifest(text: str, name: str) -> str:
    """``app: server.app:app`` → ``<name>.server.app:app``; adds ``app`` when missing (keeps the rest)."""
    if not re.search(r"^app:", text, flags=re.MULTILINE):
        return text.rstrip("\n") + f"\napp: {name}.server.app:app\n"
    return re.sub(
        r"^(app:\s*)(['\"]?)(server\.[\w.]+:\w+)\2\s*$",
        lambda m: f"{m.group(1)}{name}.{m.group(3)}",
        text,
        flags=re.MULTILINE,
    )


def _is_reference_dockerfile(text: str) -> bool:
    return "openenv-base" in text or "uv sync" in text


def _read(plan: MigrationPlan, relative: str) -> str | None:
    """The text of ``root/relative`` read without following a link; None (with a note)
    when it is a link, leaves the project or is not a regular file."""
    try:
        return read_inside(plan.root, relative).decode("utf-8")
    except FileNotFoundError:
        return None
    except UnsafePathError:
        plan.notes.append(
            f"{relative}: a symbolic link or not a regular file; left as is (migrate never "
            "reads or writes through a link)"
        )
    except UnicodeDecodeError:
        plan.notes.append(f"{relative}: not UTF-8 text; left as is")
    return None


def _python_files(plan: MigrationPlan) -> list[str]:
    """The project's ``.py`` files (POSIX, relative); linked folders are not entered."""
    found: list[str] = []
    for folder, dirs, files in os.walk(plan.root, followlinks=False):
        here = Path(folder)
        for name in sorted(dirs):
            if name in SKIP_DIRS:
                dirs.remove(name)
            elif (here / name).is_symlink():
                relative = (here / name).relative_to(plan.root).as_posix()
                plan.notes.append(f"{relative}: a link to a folder; not entered")
        found.extend(
            (here / name).relative_to(plan.root).as_posix()
            for name in files
            if name.endswith(".py")
        )
    return sorted(found)


def _plan_python(plan: MigrationPlan) -> bool:
    """Plan the import rewrites; whether the project uses FastMCP."""
    uses_mcp = False
    imported: dict[str, list[str]] = {}
    for relative in _python_files(plan):
        old = _read(plan, relative)
        if old is None:
            continue
        uses_mcp = uses_mcp or "fastmcp" in old
        try:
            new, modules, notes = rewrite_python_report(old)
        except cst.ParserSyntaxError as exc:
            plan.notes.append(f"{relative}: not valid Python ({exc.message}); left as is")
            continue
        except NotRewritable as exc:
            plan.notes.append(f"{relative}: not rewritten ({exc}); left as is")
            continue
        plan.notes.extend(f"{relative}: {note}" for note in notes)
        for module in modules:
            imported.setdefault(module, []).append(relative)
        if "import openenv\n" in new or re.search(r"^\s*import openenv\s*$", new, re.MULTILINE):
            plan.notes.append(
                f"{relative}: `import openenv` (the whole package) has no equivalent; import the names you use from openenv_runtime"
            )
        if new != old:
            plan.changes.append(FileChange(plan.root / relative, old, new))
    for module in missing_modules(set(imported)):
        where = ", ".join(sorted(set(imported[module])))
        plan.notes.append(
            f"{module} does not exist in openenv-runtime (imported by {where}); this part of the reference has no equivalent here"
        )
    return uses_mcp


def plan_migration(root: Path, dockerfile_template: str | None = None) -> MigrationPlan:
    """What ``openenv migrate`` would change in the project at ``root`` (nothing is written).

    Every file is read without following a symbolic link: a link (to anywhere) or a path
    that leaves the project is reported in ``notes`` and left as is.
    """
    plan = MigrationPlan(root=root.resolve())
    name = plan.root.name
    uses_mcp = _plan_python(plan)
    if os.path.lexists(plan.root / "pyproject.toml"):
        _plan_pyproject(plan, uses_mcp)
    _plan_manifest(plan, name)
    if dockerfile_template is not None and os.path.lexists(plan.root / "server" / "Dockerfile"):
        _plan_dockerfile(plan, dockerfile_template)
    return plan


def _plan_pyproject(plan: MigrationPlan, uses_mcp: bool) -> None:
    old = _read(plan, "pyproject.toml")
    if old is None:
        return
    try:
        new, notes = rewrite_pyproject(old, uses_mcp)
    except (TOMLKitError, RecursionError) as exc:
        plan.notes.append(f"pyproject.toml: not valid TOML ({exc}); left as is")
        return
    plan.notes.extend(notes)
    if new != old:
        plan.changes.append(FileChange(plan.root / "pyproject.toml", old, new))


def _plan_manifest(plan: MigrationPlan, name: str) -> None:
    manifest = plan.root / "openenv.yaml"
    if not name.isidentifier():
        plan.notes.append(
            f"openenv.yaml: the folder name {name!r} is not a Python package name, so "
            "`app:` cannot point into it; rename the folder and run migrate again"
        )
        return
    if not os.path.lexists(manifest):
        if os.path.lexists(plan.root / "server" / "app.py"):
            plan.new_files[manifest] = (
                f"spec_version: 1\nname: {name}\ntype: space\nruntime: fastapi\n"
                f"app: {name}.server.app:app\nport: 8000\n"
            )
            plan.notes.append(f"openenv.yaml: none found; wrote one with app {name}.server.app:app")
        return
    old = _read(plan, "openenv.yaml")
    if old is not None:
        new = rewrite_manifest(old, name)
        if new != old:
            plan.changes.append(FileChange(manifest, old, new))


def _plan_dockerfile(plan: MigrationPlan, template: str) -> None:
    dockerfile = plan.root / "server" / "Dockerfile"
    old = _read(plan, "server/Dockerfile")
    if old is None or not _is_reference_dockerfile(old):
        return
    kept = dockerfile.with_name("Dockerfile.reference")
    if kept.is_symlink() or (os.path.lexists(kept) and not kept.is_file()):
        plan.notes.append(
            "server/Dockerfile.reference is a symbolic link or not a regular file, so the "
            "original Dockerfile cannot be kept there; server/Dockerfile left as is"
        )
        return
    plan.changes.append(FileChange(dockerfile, old, template))
    plan.new_files[kept] = old
    plan.notes.append(
        "server/Dockerfile: replaced by this project's Dockerfile (no uv, no reference base image); "
        "the original is in server/Dockerfile.reference: carry over any system packages it installs"
    )


def apply_migration(plan: MigrationPlan) -> None:
    """Write the planned files, each atomically and never through a link.

    Raises :class:`OpenEnvError` when a planned path became a link (or left the project)
    since the plan was made; the files written before it stay written.
    """
    writes = [*plan.new_files.items(), *((c.path, c.new) for c in plan.changes)]
    for path, text in writes:
        relative = path.relative_to(plan.root).as_posix()
        try:
            write_inside(plan.root, relative, text)
        except UnsafePathError as exc:
            raise OpenEnvError(
                f"Did not write {relative}: {exc.message}",
                hint="Remove the link (migrate never writes through one) and run migrate again.",
            ) from exc
