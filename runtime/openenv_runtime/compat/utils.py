"""Alias of the reference's ``openenv.core.utils``."""

from ..blocking import run_to_completion as run_async_safely
from ..client.env_client import ws_url as convert_to_ws_url

__all__ = ["convert_to_ws_url", "run_async_safely"]
