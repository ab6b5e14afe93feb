"""Alias of the reference's ``openenv.core.tools.local_python_executor``."""

from . import PyExecutor

__all__ = ["PyExecutor"]
