"""The server side: :func:`create_app` builds the FastAPI app of an environment."""

from .app import create_app
from .settings import ResolvedSettings, ServerSettings, load_settings

__all__ = ["ResolvedSettings", "ServerSettings", "create_app", "load_settings"]
