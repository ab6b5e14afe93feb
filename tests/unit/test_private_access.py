"""No object reaches into another object's underscore attributes.

An underscore name is its class's (or module's) own: what another object needs of it gets a
public name, documented where it is declared (``client/port.py`` is the seam between the pool
and its sessions). The check reads the sources' syntax: every ``x._name`` whose ``x`` is not
``self``, ``cls`` or ``super()`` is a reach into someone else's privates, unless listed below
with the reason it is not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "runtime" / "openenv_runtime", ROOT / "openenv_cli"]
OWN = {"self", "cls", "mcs"}

# Names that are public although they start with an underscore, wherever they appear.
PUBLIC_DESPITE_UNDERSCORE = {
    "os._exit": "the documented way to end a process without cleanup (os module docs)",
    "sys._current_frames": "the documented way to read every thread's stack (faulthandler's kin)",
    "asyncio.events._get_running_loop": "in asyncio.events.__all__, for loop implementers",
    "asyncio.events._set_running_loop": "in asyncio.events.__all__, for loop implementers",
}

# One use in one file, with why it stays.
ALLOWED = {
    ("runtime/openenv_runtime/llm/client.py", "parts._replace"): (
        "urllib.parse's SplitResult is a namedtuple; _replace is the namedtuple's public API"
    ),
    ("runtime/openenv_runtime/server/ws/inline_frames.py", "queue._getters"): (
        "asyncio.Queue has no public way to ask whether a get() waits; a counting Queue costs "
        "every ASGI frame +0.4 to +0.6 µs (benchmarks/server/queue_watch.py), fenced by TESTED"
    ),
    ("openenv_cli/_plain_values.py", "param._runtime_param"): (
        "Typer has no public hook for a parameter's coercion: _runtime_param is the cache its "
        "get_runtime_param() fills, seeded here (the module falls back when Typer changes)"
    ),
}


def reaches(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: expression`` for each underscore attribute ``path`` reads off another object."""
    found = []
    rel = path.relative_to(root).as_posix()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute):
            owner, name = node.value, node.attr
        elif (  # getattr(x, "_name"), setattr, hasattr, delattr: the same reach, spelled out
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            owner, name = node.args[0], node.args[1].value
        else:
            continue
        if not name.startswith("_") or name.startswith("__"):
            continue
        if isinstance(owner, ast.Name) and owner.id in OWN:
            continue
        if (
            isinstance(owner, ast.Call)
            and isinstance(owner.func, ast.Name)
            and owner.func.id == "super"
        ):
            continue
        text = f"{ast.unparse(owner)}.{name}"
        if text in PUBLIC_DESPITE_UNDERSCORE or (rel, text) in ALLOWED:
            continue
        found.append(f"{rel}:{node.lineno}: {text}")
    return found


def sources() -> list[Path]:
    return sorted(path for source in SOURCES for path in source.rglob("*.py"))


def test_no_object_reads_another_objects_underscore_attributes() -> None:
    found = [line for path in sources() for line in reaches(path)]
    assert not found, (
        "give what another object needs a public name (the pool's seam: client/port.py), or "
        f"move the code onto the object that owns the attribute: {found}"
    )


def test_the_check_sees_a_reach_into_privates_and_not_ones_own(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def f(pool, self, cls):\n"
        "    self._mine, cls._ours, pool.public, os._exit, getattr(self, '_mine')\n"
        "    super()._init()\n"
        "    return pool._errors, self.pool._fail, getattr(pool, '_clients', None)\n",
        encoding="utf-8",
    )
    assert sorted(reaches(probe, tmp_path)) == [
        "probe.py:4: pool._clients",
        "probe.py:4: pool._errors",
        "probe.py:4: self.pool._fail",
    ]


def port_members(name: str) -> set[str]:
    """The members protocol ``name`` of ``client/port.py`` declares (methods, attributes)."""
    tree = ast.parse((ROOT / "runtime/openenv_runtime/client/port.py").read_text(encoding="utf-8"))
    (protocol,) = (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    members = set()
    for item in protocol.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            members.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            members.add(item.target.id)
    return members


@pytest.mark.parametrize("protocol", ["SessionPort", "SlotPool", "CheckpointSession"])
def test_the_pools_port_declares_only_public_members(protocol: str) -> None:
    members = port_members(protocol)
    assert members, f"no {protocol} in client/port.py"
    private = sorted(m for m in members if m.startswith("_") and not m.startswith("__"))
    assert not private, f"{protocol} declares underscore members: {private}"
