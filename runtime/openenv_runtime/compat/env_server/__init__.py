"""The reference's ``openenv.core.env_server``: the same names, from this runtime.

``from openenv.core.env_server import X`` becomes ``from openenv_runtime.compat.env_server
import X``. The names come from :data:`openenv_runtime.compat.REFERENCE_NAMES` and load on
first use (``MCPEnvironment`` needs the ``[mcp]`` extra).
"""

from __future__ import annotations

from typing import Any

from .. import REFERENCE_NAMES, load

_NAMES = {
    name: module.removeprefix(".env_server")
    for name, module in REFERENCE_NAMES.items()
    if module.startswith(".env_server.")
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    value = load(name, __name__, _NAMES)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_NAMES))
