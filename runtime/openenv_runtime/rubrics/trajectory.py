"""Rubrics that score a whole episode: ``TrajectoryRubric`` and its discounted variant."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from .base import Rubric


class TrajectoryRubric(Rubric):
    """Collects ``(action, observation)`` pairs; scores the episode when an observation is done.

    Until then each step gets ``intermediate_reward``. Implement ``score_trajectory`` (the
    episode's score) and ``compute_step_rewards`` (a reward per step, for credit assignment).
    """

    def __init__(self, intermediate_reward: float = 0.0) -> None:
        super().__init__()
        self.intermediate_reward = intermediate_reward
        self._trajectory: list[tuple[Any, Any]] = []

    def forward(self, action: Any, observation: Any) -> float:
        self._trajectory.append((action, observation))
        if getattr(observation, "done", False):
            return self.score_trajectory(self._trajectory)
        return self.intermediate_reward

    @abstractmethod
    def score_trajectory(self, trajectory: list[tuple[Any, Any]]) -> float:
        """The score of a finished episode."""

    @abstractmethod
    def compute_step_rewards(self) -> list[float]:
        """One reward per step of the current trajectory."""

    def reset(self) -> None:
        self._trajectory = []
        super().reset()

    @property
    def trajectory(self) -> list[tuple[Any, Any]]:
        return list(self._trajectory)

    def state_dict(self) -> dict[str, Any]:
        return {"intermediate_reward": self.intermediate_reward}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.intermediate_reward = state.get("intermediate_reward", self.intermediate_reward)


class ExponentialDiscountingTrajectoryRubric(TrajectoryRubric):
    """Step ``t`` of ``T`` gets ``score × gamma ** (T - 1 - t)``: later steps get more credit."""

    def __init__(self, gamma: float = 0.99, intermediate_reward: float = 0.0) -> None:
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be within [0, 1], got {gamma}")
        super().__init__(intermediate_reward=intermediate_reward)
        self.gamma = gamma

    def compute_step_rewards(self) -> list[float]:
        if not self._trajectory:
            return []
        final = self.score_trajectory(self._trajectory)
        last = len(self._trajectory) - 1
        return [final * self.gamma ** (last - t) for t in range(last + 1)]

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "gamma": self.gamma}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.gamma = state.get("gamma", self.gamma)
