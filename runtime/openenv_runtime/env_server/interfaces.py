"""Alias of the reference's ``openenv.core.env_server.interfaces``."""

from ..compat.interfaces import Message, ModelTokenizer, TaskProvider
from ..compat.types import EnvironmentMetadata
from ..environment import Environment
from ..models import Action, Observation, State
from ..transforms import Transform

# The reference's module also exposes the models it imports; ported code imports them from here.
__all__ = [
    "Action",
    "Environment",
    "EnvironmentMetadata",
    "Message",
    "ModelTokenizer",
    "Observation",
    "State",
    "TaskProvider",
    "Transform",
]
