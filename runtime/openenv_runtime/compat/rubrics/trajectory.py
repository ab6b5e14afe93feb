"""The reference's ``openenv.core.rubrics.trajectory``: the same names from :mod:`openenv_runtime.rubrics.trajectory`."""

from ...rubrics.trajectory import ExponentialDiscountingTrajectoryRubric, TrajectoryRubric

__all__ = ["ExponentialDiscountingTrajectoryRubric", "TrajectoryRubric"]
