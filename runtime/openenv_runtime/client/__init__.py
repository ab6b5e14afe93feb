"""The client side: :class:`EnvClient` (async), ``.sync()`` (blocking), :class:`GenericEnvClient` (dicts)."""

from openenv_runtime.client.connect import ws_url

from .env_client import EnvClient
from .generic import DictObservation, GenericEnvClient
from .sync import SyncEnvClient

__all__ = ["DictObservation", "EnvClient", "GenericEnvClient", "SyncEnvClient", "ws_url"]
