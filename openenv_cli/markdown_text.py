"""Text from a server, a file or a run shown inside Markdown the CLI writes (dataset cards,
reports) as exactly those characters: never a new line, heading, table cell, link or code
block of its own."""

from __future__ import annotations

import re
import unicodedata

# Characters with a meaning inline in CommonMark (and GitHub's tables and strikethrough).
_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#!|~&$])")
# Bidirectional overrides and isolates: they reorder what a reader sees.
_BIDI = {0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069}


def inline(text: object) -> str:
    """``text`` as inline Markdown on one line: line breaks and other control characters
    become spaces, and every character Markdown would act on is backslash-escaped."""
    flat = "".join(
        " " if unicodedata.category(c) in {"Cc", "Zl", "Zp"} or ord(c) in _BIDI else c
        for c in str(text)
    )
    return _SPECIAL.sub(r"\\\1", flat)


def code_fence(content: str) -> str:
    """A fence of backticks longer than any run of backticks in ``content``, so nothing in
    it can close the block early."""
    longest = max((len(run) for run in re.findall(r"`+", content)), default=0)
    return "`" * max(3, longest + 1)
