"""Evaluation harnesses (the reference's ``openenv.core.evals``).

:class:`EvalHarness` is the interface, :class:`EvalConfig` / :class:`EvalResult` the records,
and :class:`InspectAIHarness` runs Inspect AI tasks (extra ``openenv-runtime[evals]``).
"""

from .base import EvalHarness
from .inspect_harness import InspectAIHarness
from .types import EvalConfig, EvalResult

__all__ = ["EvalConfig", "EvalHarness", "EvalResult", "InspectAIHarness"]
