"""Rubrics: composable reward functions (``Environment(rubric=...)``; ``_apply_rubric`` in ``step``)."""

from .base import Rubric
from .containers import Gate, RubricDict, RubricList, Sequential, WeightedSum
from .llm_judge import LLMJudge
from .trajectory import ExponentialDiscountingTrajectoryRubric, TrajectoryRubric

__all__ = [
    "ExponentialDiscountingTrajectoryRubric",
    "Gate",
    "LLMJudge",
    "Rubric",
    "RubricDict",
    "RubricList",
    "Sequential",
    "TrajectoryRubric",
    "WeightedSum",
]
