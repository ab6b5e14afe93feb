"""The Python blocks of docs/env-reasoning-gym.md and docs/env-textarena.md, run as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"


def python_blocks(page: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", (DOCS / page).read_text(), re.S | re.M)


def run(source: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "<docs>", "exec"), {"__name__": "docs_block"})
    return out.getvalue()


def test_reasoning_gym_page_block_serves_answers_and_gives_feedback() -> None:
    pytest.importorskip("reasoning_gym")
    (block,) = python_blocks("env-reasoning-gym.md")
    lines = run(block).splitlines()
    assert "1 cricket, 4 fireflys, 8 woodlouses?" in lines[2]
    assert lines[-3:] == [
        "0.0 False",
        "Your answer scored 0 out of 1. 1 attempt left: try again.",
        "0.375 True",
    ]


def test_textarena_page_block_plays_a_game_to_its_end() -> None:
    pytest.importorskip("textarena")
    (block,) = python_blocks("env-textarena.md")
    reward, _, reason = run(block).strip().partition(" ")
    assert float(reward) == 1.0 and "Congratulations" in reason
