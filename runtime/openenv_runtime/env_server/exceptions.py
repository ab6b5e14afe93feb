"""Alias of the reference's ``openenv.core.env_server.exceptions``."""

from ..compat.exceptions import (
    ConcurrencyConfigurationError,
    EnvironmentFactoryError,
    OpenEnvError,
    SessionCapacityError,
    SessionCreationError,
    SessionNotFoundError,
)

__all__ = [
    "ConcurrencyConfigurationError",
    "EnvironmentFactoryError",
    "OpenEnvError",
    "SessionCapacityError",
    "SessionCreationError",
    "SessionNotFoundError",
]
