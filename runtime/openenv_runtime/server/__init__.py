"""The server side: :func:`create_app` builds the FastAPI app of an environment."""

from openenv_runtime.server.app import create_app
from openenv_runtime.server.config.fields import ServerSettings
from openenv_runtime.server.config.settings import ResolvedSettings, load_settings

__all__ = ["ResolvedSettings", "ServerSettings", "create_app", "load_settings"]
