"""Observation transforms: functions of an observation, applied by ``Environment._apply_transform``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from .models import Observation

ObsT = TypeVar("ObsT", bound=Observation)


class Transform(ABC, Generic[ObsT]):
    """Maps an observation to an observation (add a reward, a metric, a field, ...)."""

    @abstractmethod
    def __call__(self, observation: ObsT) -> ObsT:
        """Return the transformed observation (a new one, or ``observation`` changed)."""


class NullTransform(Transform[Any]):
    """Returns the observation unchanged."""

    def __call__(self, observation: Any) -> Any:
        return observation


class CompositeTransform(Transform[Any]):
    """Applies several transforms, first to last."""

    def __init__(self, transforms: Iterable[Transform[Any]]) -> None:
        self.transforms = list(transforms)

    def __call__(self, observation: Any) -> Any:
        for transform in self.transforms:
            observation = transform(observation)
        return observation
