"""Alias of the reference's ``openenv.core.env_server.http_server``."""

from ..server.app import create_app
from ..server.compat import HTTPEnvServer, create_fastapi_app

__all__ = ["HTTPEnvServer", "create_app", "create_fastapi_app"]
