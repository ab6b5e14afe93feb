"""Alias of the reference's ``openenv.core.sync_client``."""

from ..client.sync import SyncEnvClient

__all__ = ["SyncEnvClient"]
