"""The reference's ``openenv.core.evals.types``: the same names from :mod:`openenv_runtime.evals.types`."""

from ...evals.types import EvalConfig, EvalResult

__all__ = ["EvalConfig", "EvalResult"]
