"""The reference's ``openenv.core.rubrics.base``: the same names from :mod:`openenv_runtime.rubrics.base`."""

from ...rubrics.base import Rubric

__all__ = ["Rubric"]
