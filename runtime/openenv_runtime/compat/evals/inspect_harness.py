"""The reference's ``openenv.core.evals.inspect_harness``: the same names from :mod:`openenv_runtime.evals.inspect_harness`."""

from ...evals.inspect_harness import InspectAIHarness

__all__ = ["InspectAIHarness"]
