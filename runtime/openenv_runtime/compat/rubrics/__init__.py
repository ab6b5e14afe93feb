"""The reference's ``openenv.core.rubrics``: the same names from :mod:`openenv_runtime.rubrics`."""

from ...rubrics import (
    ExponentialDiscountingTrajectoryRubric,
    Gate,
    LLMJudge,
    Rubric,
    RubricDict,
    RubricList,
    Sequential,
    TrajectoryRubric,
    WeightedSum,
)

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
