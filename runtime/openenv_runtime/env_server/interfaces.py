"""Alias of the reference's ``openenv.core.env_server.interfaces``."""

from ..compat.interfaces import Message, ModelTokenizer, TaskProvider
from ..environment import Environment
from ..transforms import Transform

__all__ = ["Environment", "Message", "ModelTokenizer", "TaskProvider", "Transform"]
