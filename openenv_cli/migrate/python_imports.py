"""Rewriting a Python file's imports of the reference (``openenv.core``, ``openenv_core``,
``openenv.auto``) to their place here, with libcst so formatting and comments stay as they were.
"""

from __future__ import annotations

import ast
import importlib.util
import re

import libcst as cst
from libcst.helpers import get_full_name_for_node

RUNTIME = "openenv_runtime"
COMPAT = f"{RUNTIME}.compat"  # where the reference's ``openenv.core`` tree lives here
_STRING_PREFIX = re.compile(
    r"""^(?P<q>[rRbBuU]*['"]{1,3})(?P<mod>openenv\.core|openenv_core|openenv\.auto)(?=[.'"])"""
)
_AUTO = f"{RUNTIME}.auto"
MAX_NESTING = 400  # syntax-tree depth; real code stays far below, libcst takes ~0.5 s here
# Module paths the reference's documentation uses that its package never had.
ALSO_RENAMED = {"openenv.providers": f"{COMPAT}.containers.runtime"}


def _dotted(name: str) -> cst.Attribute | cst.Name:
    """The expression for a dotted module name."""
    head, _, last = name.rpartition(".")
    if not head:
        return cst.Name(last)
    return cst.Attribute(value=_dotted(head), attr=cst.Name(last))


def _is_runtime(module: str) -> bool:
    """``openenv_runtime`` or one of its modules (``openenv_runtime_x`` is someone else's:
    looking it up would import the project's own code)."""
    return module == RUNTIME or module.startswith(RUNTIME + ".")


class _ImportRewriter(cst.CSTTransformer):
    """Renames the reference's module prefixes to ``openenv_runtime.compat`` wherever they appear."""

    def __init__(self) -> None:
        super().__init__()
        self.modules: set[str] = set()
        self.unmapped: set[str] = set()  # reference-namespace modules with no counterpart
        self.renamed: dict[str, str] = {}  # spellings outside the reference's own modules

    def leave_Attribute(
        self, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression:
        name = get_full_name_for_node(updated)
        if name == "openenv.core":
            return _dotted(COMPAT)
        if name == "openenv.auto":  # the reference's auto package has its twin here
            return _dotted(_AUTO)
        if name in ALSO_RENAMED:
            self.renamed[name] = ALSO_RENAMED[name]
            return _dotted(ALSO_RENAMED[name])
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
        if _is_runtime(module):
            self.modules.add(module)
        elif module.startswith("openenv."):
            self.unmapped.add(module)
        return updated

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import:
        for alias in updated.names:
            name = get_full_name_for_node(alias.name) or ""
            if _is_runtime(name):
                self.modules.add(name)
            elif name.startswith("openenv."):
                self.unmapped.add(name)
        return updated

    def leave_SimpleString(
        self, original: cst.SimpleString, updated: cst.SimpleString
    ) -> cst.SimpleString:
        match = _STRING_PREFIX.match(updated.value)
        if match is None:
            return updated
        target = _AUTO if match.group("mod") == "openenv.auto" else COMPAT
        return updated.with_changes(value=match.group("q") + target + updated.value[match.end() :])


class NotRewritable(ValueError):
    """Python that CPython refuses, or nested too deeply for libcst to parse safely (its
    parser crashes on very deep nesting and slows quadratically on long chains)."""


def _check_parsable(source: str) -> None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, RecursionError, MemoryError, ValueError) as exc:
        raise NotRewritable(f"CPython cannot parse it: {type(exc).__name__}") from None
    deepest = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_NESTING:
            raise NotRewritable(f"nested over {MAX_NESTING} levels deep")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def rewrite_python(source: str) -> tuple[str, set[str]]:
    """``source`` with the reference's imports renamed; also the runtime modules it now imports.

    Raises :class:`NotRewritable` (before libcst sees it) for what CPython cannot parse or
    what is nested over ``MAX_NESTING`` levels.
    """
    new, modules, _ = rewrite_python_report(source)
    return new, modules


def rewrite_python_report(source: str) -> tuple[str, set[str], list[str]]:
    """As :func:`rewrite_python`, plus one note per import it renamed by the docs' spelling
    or could not map (a module of the ``openenv`` namespace with no counterpart here)."""
    if "openenv" not in source:
        return source, set(), []
    _check_parsable(source)
    tree = cst.parse_module(source)
    rewriter = _ImportRewriter()
    new = tree.visit(rewriter).code
    notes = [
        f"`{old}` is not a module of the reference (its docs spell it so); renamed to `{ours}`, "
        "which holds those names"
        for old, ours in sorted(rewriter.renamed.items())
    ]
    notes += [
        f"`{module}` has no counterpart in openenv-runtime; left as is (docs/migrating.md "
        "maps the reference's modules)"
        for module in sorted(rewriter.unmapped)
    ]
    return new, rewriter.modules, notes


def missing_modules(modules: set[str]) -> list[str]:
    """The modules of ``modules`` that cannot be found (not importable here)."""
    missing = []
    for module in sorted(modules):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(module)
    return missing
