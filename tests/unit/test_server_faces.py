"""The server's modules talk through each other's public names: no ``other._private`` use in
``server/`` but the few reads of a library's internals a measured need keeps (each named here,
with the comment or docstring at its use saying why)."""

from __future__ import annotations

import ast
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "runtime" / "openenv_runtime" / "server"
KEPT = {
    # the running-loop switch of a step run inline (what asyncio's own loops call)
    ("running/step_placement.py", "asyncio.events._set_running_loop"),
    ("running/step_placement.py", "asyncio.events._get_running_loop"),
    # a get() waiting: no public way, a public one costs every ASGI frame (queue_watch.py)
    ("ws/inline_frames.py", "queue._getters"),
}


def private_uses() -> set[tuple[str, str]]:
    found = set()
    for path in SERVER.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__"):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Call) and ast.unparse(owner.func) == "super":
                continue
            found.add((path.relative_to(SERVER).as_posix(), ast.unparse(node)))
    return found


def test_no_server_module_uses_another_objects_private_attributes() -> None:
    assert private_uses() - KEPT == set()
