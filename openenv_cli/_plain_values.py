"""Plain command-line values without building a pydantic ``TypeAdapter`` for each option.

Recent Typer checks every value it parses through a pydantic ``TypeAdapter`` built for the
parameter's type on first use: importing pydantic and building the adapters takes about a
tenth of a second, longer than the rest of ``openenv init``. Most options here are plain
``str``, ``Path`` or ``int`` values, for which the answer is known without pydantic.

:func:`speed_up` gives such a parameter a coercion that handles the plain cases itself (a
string for ``str``; a path or a non-empty string for ``Path``, then Typer's own path checks;
an integer written in decimal digits, within the option's bounds, for ``int``) and hands
every other value to the coercion Typer would have built, so errors and unusual values read
exactly as before. On an older Typer, which has no such layer, it does nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:  # Typer's private coercion layer: present in the versions that build TypeAdapters
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_path, routes_to_path
except ImportError:  # pragma: no cover - older Typer coerces through click, quickly
    RuntimeParam = None  # type: ignore[assignment,misc]

_DECIMAL = re.compile(r"[+-]?[0-9]+")


def speed_up(param: Any) -> None:
    """Give ``param`` the plain-value coercion when its type is one this module knows."""
    if RuntimeParam is None or getattr(param, "_runtime_param", True) is not None:
        return  # older Typer, or the coercion was already chosen
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or descriptor.file_annotation is not None:
        return
    info = descriptor.parameter_info
    annotation = descriptor.annotation
    if info.parser is not None or getattr(info, "clamp", False):
        return
    plain_path = isinstance(annotation, type) and issubclass(annotation, Path)
    if annotation is str or annotation is int or (plain_path and routes_to_path(annotation, info)):
        try:
            param._runtime_param = _Plain(info, annotation, descriptor)
        except TypeError:  # a Typer whose coercion layer changed shape: leave it to Typer
            return


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class _Plain(RuntimeParam):
        """Plain values here; anything else through the coercion Typer would build."""

        descriptor: Any
        _typer: list[Any] = field(default_factory=list)  # Typer's own, built when needed

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            annotation = self.annotation
            if annotation is str and isinstance(value, str):
                return value
            if annotation is int:
                number = _decimal(value)
                if number is not None and self._in_bounds(number):
                    return number
            elif annotation is not str and (
                isinstance(value, Path) or (isinstance(value, str) and value)
            ):
                path_type = self.parameter_info.path_type or annotation
                if not (isinstance(path_type, type) and issubclass(path_type, Path)):
                    return self._fallback().coerce(value, param=param, ctx=ctx)
                return coerce_cli_path(
                    value if isinstance(value, path_type) else path_type(value),
                    self.parameter_info,
                    path_type=path_type,
                    param=param,
                    ctx=ctx,
                )
            return self._fallback().coerce(value, param=param, ctx=ctx)

        def _in_bounds(self, number: int) -> bool:
            low, high = self.parameter_info.min, self.parameter_info.max
            return (low is None or number >= low) and (high is None or number <= high)

        def _fallback(self) -> Any:
            if not self._typer:
                self._typer.append(build_runtime_param(self.descriptor))
            return self._typer[0]


def _decimal(value: Any) -> int | None:
    """``value`` as an int when it is one already or is written in decimal digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        return int(value)
    return None
