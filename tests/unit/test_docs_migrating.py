"""docs/migrating.md and docs/first-hour.md: runnable blocks run, the others say why not
(``text`` blocks are output), and the reference-name map is true."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
DOC = DOCS / "migrating.md"
BLOCK = re.compile(r"(<!-- not run: [^>]+-->\n)?```(\w+)\n(.*?)```", re.S)


@pytest.mark.parametrize("name", ["migrating.md", "first-hour.md"])
def test_every_block_runs_or_says_why_not(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = BLOCK.findall((DOCS / name).read_text(encoding="utf-8"))
    assert blocks
    for skipped, language, code in blocks:
        if skipped or language == "text":
            continue
        assert language == "python", f"a {language} block needs a reason not to run: {code[:60]}"
        exec(compile(code, name, "exec"), {})  # the document's own example


def test_the_map_names_modules_that_hold_the_names() -> None:
    runtime = importlib.import_module("openenv_runtime.compat.containers.runtime")
    for name in ("LocalDockerProvider", "DockerSwarmProvider", "UVProvider", "DaytonaProvider"):
        assert hasattr(runtime, name)
    text = DOC.read_text(encoding="utf-8")
    assert "| `openenv.providers`" in text and "`openenv.core.containers.runtime`" in text
