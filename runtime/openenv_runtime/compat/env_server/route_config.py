"""Alias of the reference's ``openenv.core.env_server.route_config``."""

from .interfaces import GetEndpointConfig

__all__ = ["GetEndpointConfig"]
