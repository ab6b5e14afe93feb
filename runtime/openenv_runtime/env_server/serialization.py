"""Alias of the reference's ``openenv.core.env_server.serialization``."""

from ..compat.serialization import (
    deserialize_action,
    deserialize_action_with_preprocessing,
    serialize_observation,
)

__all__ = ["deserialize_action", "deserialize_action_with_preprocessing", "serialize_observation"]
