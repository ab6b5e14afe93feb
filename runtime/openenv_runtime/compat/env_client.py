"""Alias of the reference's ``openenv.core.env_client``."""

from ..client.env_client import EnvClient
from ..models import StepResult

__all__ = ["EnvClient", "StepResult"]
