"""openenv_cli.markdown_text: names shown in Markdown stay one line of plain characters."""

from __future__ import annotations

import pytest

from openenv_cli.markdown_text import code_fence, inline


@pytest.mark.parametrize(
    "hostile", ["a\nb", "a\r\nb", "a\u2028b", "a\u2029b", "a\x85b", "a\x1b[2Jb", "a\u202eb"]
)
def test_line_breaks_and_controls_become_spaces(hostile: str) -> None:
    shown = inline(hostile)
    assert shown.startswith("a") and shown.endswith("b")
    assert len(shown.splitlines()) == 1 and all(c.isprintable() for c in shown)


def test_markdown_specials_are_escaped() -> None:
    assert inline("`x` | *y* [l](u) <b>") == r"\`x\` \| \*y\* \[l\]\(u\) \<b\>"
    assert inline("back\\slash") == "back\\\\slash"
    assert inline(None) == "None" and inline(3) == "3"


def test_a_plain_name_is_unchanged() -> None:
    assert inline("EchoEnvironment v1.0") == "EchoEnvironment v1.0"


def test_the_fence_outgrows_any_backtick_run() -> None:
    assert code_fence('{"a": 1}') == "```"
    assert code_fence('{"a": "``` ````"}') == "`````"
