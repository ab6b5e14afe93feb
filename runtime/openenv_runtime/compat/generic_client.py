"""Alias of the reference's ``openenv.core.generic_client``."""

from ..client.generic import GenericAction, GenericEnvClient

__all__ = ["GenericAction", "GenericEnvClient"]
