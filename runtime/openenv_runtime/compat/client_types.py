"""Alias of the reference's ``openenv.core.client_types``."""

from typing import TypeVar

from ..models import StepResult

StateT = TypeVar("StateT")

__all__ = ["StateT", "StepResult"]
