"""Reading ``openenv.yaml`` and other small YAML files without letting the file run the reader.

PyYAML's ``safe_load`` creates no objects of its own choosing, but it still reads a 16 MB file
for minutes, recurses once per nesting level (100,000 ``[`` crash it), and builds an alias
bomb (``&a [*b, *b, ...]`` nested a few levels) whose expansion hangs whoever walks the result.
:func:`load_bounded` refuses each of these with a message that says what to change: files over
:data:`MAX_BYTES`, nesting deeper than :data:`MAX_DEPTH`, and any alias (``*name``; a settings
file never needs one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MAX_BYTES = 1 << 20
"""Largest YAML file read (1 MiB; a manifest is a few hundred bytes)."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and sequences accepted."""


class YamlRefused(ValueError):
    """The YAML is too large, too deep, or uses aliases; the message says which and where."""


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that counts nesting as it composes and refuses aliases."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise YamlRefused(
                f"YAML aliases (*{event.anchor}) are not accepted{_where(event)}; "
                "write the value out instead."
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                event = self.peek_event()  # type: ignore[no-untyped-call]
                raise YamlRefused(
                    f"YAML nested more than {MAX_DEPTH} levels deep{_where(event)}; "
                    "flatten the file."
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _where(event: Any) -> str:
    mark = getattr(event, "start_mark", None)
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def load_bounded(text: str) -> Any:
    """``yaml.safe_load(text)`` within the bounds above; raises :class:`YamlRefused` or
    ``yaml.YAMLError``."""
    if len(text) > MAX_BYTES:
        raise YamlRefused(
            f"the file is {len(text)} characters; at most {MAX_BYTES} are read. "
            "Keep only settings in it."
        )
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_bounded(path: Path) -> Any:
    """Read ``path`` (refusing it unread when over :data:`MAX_BYTES`) and :func:`load_bounded` it."""
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise YamlRefused(
            f"{path} is {size} bytes; at most {MAX_BYTES} are read. Keep only settings in it."
        )
    return load_bounded(path.read_text(encoding="utf-8"))
