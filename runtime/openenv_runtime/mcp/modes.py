"""Tools that exist only in one mode: ``production`` (real systems) or ``simulation`` (stand-ins).

``@env.tool(mode="simulation")`` on an :class:`~openenv_runtime.mcp.MCPEnvironment`
registers a function on that mode's own FastMCP server, so its argument schema,
validation and sync/async handling are FastMCP's, exactly as for ordinary tools. The same
name may be registered once per mode. The environment's ``mode`` picks which are listed
and called; a tool registered without a mode goes to the environment's main server and is
there in every mode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .types import RESERVED_TOOL_NAMES

VALID_MODES = ("production", "simulation")


def check_mode(mode: str | None) -> None:
    if mode is not None and mode not in VALID_MODES:
        raise ValueError(
            f"Invalid mode {mode!r}: a tool's mode must be 'production', 'simulation' or None "
            "(None: every mode)."
        )


def check_tool_name(name: str) -> None:
    if name in RESERVED_TOOL_NAMES:
        raise ValueError(
            f"Tool name {name!r} is reserved for the environment protocol "
            f"({', '.join(sorted(RESERVED_TOOL_NAMES))}); rename the function."
        )


class ModeTools:
    """The functions registered per mode, each mode with a FastMCP server of its own."""

    def __init__(self, fastmcp: Any, label: str) -> None:
        self._fastmcp = fastmcp
        self._label = label
        self.servers: dict[str, Any] = {}
        self.functions: dict[str, dict[str | None, Callable[..., Any]]] = {}

    def register(self, mode: str, func: Callable[..., Any]) -> None:
        server = self.servers.get(mode)
        if server is None:
            server = self.servers[mode] = self._fastmcp.FastMCP(f"{self._label}-{mode}")
        server.tool(func)  # registered again for this mode: FastMCP keeps the new one
        self.functions.setdefault(func.__name__, {})[mode] = func

    def server_for(self, name: str, mode: str | None) -> Any | None:
        """The server holding ``name`` in ``mode``, or None when it is not mode-specific there."""
        if mode is not None and mode in self.functions.get(name, {}):
            return self.servers[mode]
        return None

    def unavailable(self, name: str, mode: str | None) -> bool:
        """Whether ``name`` exists only in other modes than ``mode``."""
        modes = self.functions.get(name, {})
        return bool(modes) and mode not in modes

    def in_mode(self, mode: str | None) -> dict[str, Callable[..., Any]]:
        return {
            name: modes[mode]
            for name, modes in self.functions.items()
            if mode is not None and mode in modes
        }
