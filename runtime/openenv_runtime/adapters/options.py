"""Target options (URL query strings) turned into the typed values a library's constructor takes."""

from __future__ import annotations

import json
import typing
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..errors import AdapterError

_SEQUENCES = (list, tuple, set, frozenset)


def convert_option(key: str, value: str, hint: Any = Any) -> Any:
    """``value`` as type ``hint``: ``"3"`` an int, ``"true"`` a bool, ``"a,b"`` or ``'["a","b"]'``
    a list. Without a hint (``Any``), JSON when it parses (``3``, ``true``, ``[1,2]``), else the
    string itself. Raises :class:`AdapterError` naming the option when nothing fits."""
    if hint is Any:
        try:
            return json.loads(value)
        except ValueError:
            return value
    adapter: TypeAdapter[Any] = TypeAdapter(hint)
    candidates: list[Any] = [value]
    try:
        candidates.append(json.loads(value))
    except ValueError:
        pass
    if typing.get_origin(hint) in _SEQUENCES or any(
        typing.get_origin(arg) in _SEQUENCES for arg in typing.get_args(hint)
    ):
        candidates.append([part.strip() for part in value.split(",") if part.strip()])
    for candidate in candidates:
        try:
            return adapter.validate_python(candidate)
        except ValidationError:
            continue
    name = hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")
    raise AdapterError(f"Option {key}={value!r} is not a valid {name}: fix its value.")
