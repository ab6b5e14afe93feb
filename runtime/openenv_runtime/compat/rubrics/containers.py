"""The reference's ``openenv.core.rubrics.containers``: the same names from :mod:`openenv_runtime.rubrics.containers`."""

from ...rubrics.containers import Gate, RubricDict, RubricList, Sequential, WeightedSum

__all__ = ["Gate", "RubricDict", "RubricList", "Sequential", "WeightedSum"]
