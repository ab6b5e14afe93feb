"""Alias of the reference's ``openenv.core.utils``."""

from openenv_runtime.client.connect import ws_url as convert_to_ws_url

from ..blocking import run_to_completion as run_async_safely

__all__ = ["convert_to_ws_url", "run_async_safely"]
