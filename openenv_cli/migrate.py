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

import difflib
import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
import tomlkit
from libcst.helpers import get_full_name_for_node
from packaging.requirements import InvalidRequirement, Requirement

RUNTIME = "openenv_runtime"
COMPAT = f"{RUNTIME}.compat"  # where the reference's ``openenv.core`` tree lives here
RUNTIME_DIST = "openenv-runtime"
REFERENCE_DISTS = frozenset({"openenv-core", "openenv", "openenv_core"})
SKIP_DIRS = frozenset(
    {".git", ".venv", "venv", "__pycache__", "node_modules", ".mypy_cache", "build", "dist"}
)
_STRING_PREFIX = re.compile(
    r"""^(?P<q>[rRbBuU]*['"]{1,3})(?P<mod>openenv\.core|openenv_core|openenv\.auto)(?=[.'"])"""
)
_AUTO = f"{RUNTIME}.auto"


@dataclass
class FileChange:
    path: Path
    old: str
    new: str

    def diff(self, root: Path) -> str:
        name = self.path.relative_to(root).as_posix()
        return "".join(
            difflib.unified_diff(
                self.old.splitlines(keepends=True),
                self.new.splitlines(keepends=True),
                fromfile=f"a/{name}",
                tofile=f"b/{name}",
            )
        )


@dataclass
class MigrationPlan:
    root: Path
    changes: list[FileChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be translated, and why
    new_files: dict[Path, str] = field(default_factory=dict)

    def diff(self) -> str:
        return "".join(c.diff(self.root) for c in self.changes)


def _dotted(name: str) -> cst.Attribute | cst.Name:
    """The expression for a dotted module name."""
    head, _, last = name.rpartition(".")
    if not head:
        return cst.Name(last)
    return cst.Attribute(value=_dotted(head), attr=cst.Name(last))


class _ImportRewriter(cst.CSTTransformer):
    """Renames the reference's module prefixes to ``openenv_runtime.compat`` wherever they appear."""

    def __init__(self) -> None:
        super().__init__()
        self.modules: set[str] = set()

    def leave_Attribute(
        self, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression:
        name = get_full_name_for_node(updated)
        if name == "openenv.core":
            return _dotted(COMPAT)
        if name == "openenv.auto":  # the reference's auto package has its twin here
            return _dotted(_AUTO)
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return _dotted(COMPAT) if updated.value == "openenv_core" else updated

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        module = get_full_name_for_node(updated.module) if updated.module is not None else None
        if module is None or updated.relative:
            return updated
        if module == "openenv":
            # from openenv import AutoEnv → the reference's top-level names
            updated = updated.with_changes(module=_dotted(COMPAT))
            module = COMPAT
        if module.startswith(RUNTIME):
            self.modules.add(module)
        return updated

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import:
        for alias in updated.names:
            name = get_full_name_for_node(alias.name) or ""
            if name.startswith(RUNTIME):
                self.modules.add(name)
        return updated

    def leave_SimpleString(
        self, original: cst.SimpleString, updated: cst.SimpleString
    ) -> cst.SimpleString:
        match = _STRING_PREFIX.match(updated.value)
        if match is None:
            return updated
        target = _AUTO if match.group("mod") == "openenv.auto" else COMPAT
        return updated.with_changes(value=match.group("q") + target + updated.value[match.end() :])


def rewrite_python(source: str) -> tuple[str, set[str]]:
    """``source`` with the reference's imports renamed; also the runtime modules it now imports."""
    if "openenv" not in source:
        return source, set()
    tree = cst.parse_module(source)
    rewriter = _ImportRewriter()
    return tree.visit(rewriter).code, rewriter.modules


def _missing_modules(modules: set[str]) -> list[str]:
    missing = []
    for module in sorted(modules):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(module)
    return missing


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


def plan_migration(root: Path, dockerfile_template: str | None = None) -> MigrationPlan:
    """What ``openenv migrate`` would change in the project at ``root`` (nothing is written)."""
    root = root.resolve()
    plan = MigrationPlan(root=root)
    name = root.name
    uses_mcp = False
    imported: dict[str, list[Path]] = {}
    for path in sorted(root.rglob("*.py")):
        if any(part in SKIP_DIRS for part in path.relative_to(root).parts):
            continue
        old = path.read_text(encoding="utf-8")
        uses_mcp = uses_mcp or "fastmcp" in old
        try:
            new, modules = rewrite_python(old)
        except cst.ParserSyntaxError as exc:
            plan.notes.append(
                f"{path.relative_to(root)}: not valid Python ({exc.message}); left as is"
            )
            continue
        for module in modules:
            imported.setdefault(module, []).append(path)
        if "import openenv\n" in new or re.search(r"^\s*import openenv\s*$", new, re.MULTILINE):
            plan.notes.append(
                f"{path.relative_to(root)}: `import openenv` (the whole package) has no equivalent; import the names you use from openenv_runtime"
            )
        if new != old:
            plan.changes.append(FileChange(path, old, new))
    for module in _missing_modules(set(imported)):
        where = ", ".join(sorted({str(p.relative_to(root)) for p in imported[module]}))
        plan.notes.append(
            f"{module} does not exist in openenv-runtime (imported by {where}); this part of the reference has no equivalent here"
        )
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        old = pyproject.read_text(encoding="utf-8")
        new, notes = rewrite_pyproject(old, uses_mcp)
        plan.notes.extend(notes)
        if new != old:
            plan.changes.append(FileChange(pyproject, old, new))
    manifest = root / "openenv.yaml"
    if not manifest.is_file() and (root / "server" / "app.py").is_file():
        plan.new_files[manifest] = (
            f"spec_version: 1\nname: {name}\ntype: space\nruntime: fastapi\n"
            f"app: {name}.server.app:app\nport: 8000\n"
        )
        plan.notes.append(f"openenv.yaml: none found; wrote one with app {name}.server.app:app")
    elif manifest.is_file():
        old = manifest.read_text(encoding="utf-8")
        new = rewrite_manifest(old, name)
        if new != old:
            plan.changes.append(FileChange(manifest, old, new))
    dockerfile = root / "server" / "Dockerfile"
    if dockerfile.is_file() and dockerfile_template is not None:
        old = dockerfile.read_text(encoding="utf-8")
        if _is_reference_dockerfile(old):
            plan.changes.append(FileChange(dockerfile, old, dockerfile_template))
            plan.new_files[dockerfile.with_name("Dockerfile.reference")] = old
            plan.notes.append(
                "server/Dockerfile: replaced by this project's Dockerfile (no uv, no reference base image); "
                "the original is in server/Dockerfile.reference: carry over any system packages it installs"
            )
    return plan


def apply_migration(plan: MigrationPlan) -> None:
    """Write the planned files."""
    for path, text in plan.new_files.items():
        path.write_text(text, encoding="utf-8")
    for change in plan.changes:
        change.path.write_text(change.new, encoding="utf-8")
