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
