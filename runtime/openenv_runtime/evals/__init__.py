"""Alias of the reference's ``openenv.core.evals``: evaluation harnesses are not part of this runtime."""

from ..compat.unavailable import unavailable

_ADVICE = (
    "Run evaluations with your trainer's tooling (or the reference's harness) against this server."
)
EvalConfig = unavailable("EvalConfig", _ADVICE)
EvalHarness = unavailable("EvalHarness", _ADVICE)
EvalResult = unavailable("EvalResult", _ADVICE)
InspectAIHarness = unavailable("InspectAIHarness", _ADVICE)

__all__ = ["EvalConfig", "EvalHarness", "EvalResult", "InspectAIHarness"]
