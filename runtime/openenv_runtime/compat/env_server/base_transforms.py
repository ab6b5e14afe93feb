"""Alias of the reference's ``openenv.core.env_server.base_transforms``."""

from ...transforms import CompositeTransform, NullTransform

__all__ = ["CompositeTransform", "NullTransform"]
