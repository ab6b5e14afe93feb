"""Alias of the reference's ``openenv.core.env_server.mcp_types``."""

from ...mcp.types import *  # noqa: F403
from ...mcp.types import __all__ as _all

__all__ = list(_all)
