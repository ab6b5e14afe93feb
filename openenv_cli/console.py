"""The rich consoles every command prints through (stdout for results, stderr for errors)."""

from __future__ import annotations

import os

from rich.console import Console

console = Console()
err_console = Console(stderr=True)

_debug = False


def debug_enabled() -> bool:
    """True when tracebacks should be shown (``--debug`` or ``OPENENV_DEBUG=1``)."""
    return _debug or os.environ.get("OPENENV_DEBUG", "").strip().lower() in {
        "1",
        "true",
        "yes",
        "on",
    }


def set_debug(value: bool) -> None:
    global _debug
    _debug = value


# C0 controls but tab and newline, DEL, and C1 controls: what a terminal may act on.
_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)] if c not in (9, 10)}


def visible(text: str) -> str:
    """``text`` with every terminal control character shown as ``\\xNN``: file names and
    contents from a project (a diff, say) cannot move the cursor, clear the screen, retitle
    the window or write the clipboard of whoever reads the output."""
    return text.translate(_CONTROLS)
