"""Alias of the reference's ``openenv.core.utils``."""

from ..client.env_client import ws_url as convert_to_ws_url
from ..mcp.environment import run_blocking as run_async_safely

__all__ = ["convert_to_ws_url", "run_async_safely"]
