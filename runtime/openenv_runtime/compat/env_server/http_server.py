"""Alias of the reference's ``openenv.core.env_server.http_server``."""

from ...environment import Environment
from ...models import Action, Observation, State
from ...server.app import create_app
from ...server.compat import HTTPEnvServer, create_fastapi_app
from ...wire import ConcurrencyConfig, ServerMode

__all__ = [
    "Action",
    "ConcurrencyConfig",
    "Environment",
    "HTTPEnvServer",
    "Observation",
    "ServerMode",
    "State",
    "create_app",
    "create_fastapi_app",
]
