"""Alias of the reference's ``openenv.core.env_server.route_config``."""

from ..compat.interfaces import GetEndpointConfig

__all__ = ["GetEndpointConfig"]
