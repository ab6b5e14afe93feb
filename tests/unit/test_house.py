"""Rules of the house that a reviewer would otherwise have to remember."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "openenv_cli", ROOT / "runtime" / "openenv_runtime"]

# Loops that read /health for something else than "is it up yet", each with why.
HEALTH_LOOPS_ALLOWED = {
    # waits for the last run's sessions to close (active_sessions), not for the server to answer
    "openenv_cli/bench/runner.py",
    # the same wait over several replicas at once, beside wait_until_healthy and with its probe
    "runtime/openenv_runtime/providers/base.py",
}


def health_polls(path: Path) -> list[int]:
    """Lines of ``while`` loops in ``path`` whose body names ``/health``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.While):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Constant) and "/health" in str(inner.value):
                    found.append(node.lineno)
                    break
    return found


def test_every_wait_for_a_server_goes_through_wait_until_healthy() -> None:
    loops = {
        f"{path.relative_to(ROOT)}:{line}"
        for source in SOURCES
        for path in source.rglob("*.py")
        if str(path.relative_to(ROOT)) not in HEALTH_LOOPS_ALLOWED
        for line in health_polls(path)
    }
    assert not loops, (
        "poll /health with openenv_runtime.providers.base.wait_until_healthy "
        f"(its `alive` callback says why a server cannot come up): {sorted(loops)}"
    )
