"""The reference's ``openenv.core.evals.base``: the same names from :mod:`openenv_runtime.evals.base`."""

from ...evals.base import EvalHarness

__all__ = ["EvalHarness"]
