"""The client side: :class:`EnvClient` (async), ``.sync()`` (blocking), :class:`GenericEnvClient` (dicts)."""

from .env_client import EnvClient, ws_url
from .generic import DictObservation, GenericEnvClient
from .sync import SyncEnvClient

__all__ = ["DictObservation", "EnvClient", "GenericEnvClient", "SyncEnvClient", "ws_url"]
