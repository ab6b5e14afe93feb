"""The server side: :func:`create_app` builds the FastAPI app of an environment."""

from .app import create_app
from .config import ServerConfig, resolve_config

__all__ = ["ServerConfig", "create_app", "resolve_config"]
