"""The server side: :func:`create_app` builds the FastAPI app of an environment."""

from openenv_runtime.server.settings_fields import ServerSettings

from .app import create_app
from .settings import ResolvedSettings, load_settings

__all__ = ["ResolvedSettings", "ServerSettings", "create_app", "load_settings"]
