"""Alias of the reference's ``openenv.core.tools.git_server_client``."""

from . import GitServerClient

__all__ = ["GitServerClient"]
