"""The reference's ``openenv.core.evals``: the same names from :mod:`openenv_runtime.evals`."""

from ...evals import EvalConfig, EvalHarness, EvalResult, InspectAIHarness

__all__ = ["EvalConfig", "EvalHarness", "EvalResult", "InspectAIHarness"]
