"""Alias of the reference's ``openenv.core.tools`` (helpers some environments use)."""

from ..unavailable import unavailable

_ADVICE = "Keep your own copy of this helper in your environment's package."
GitServerClient = unavailable("GitServerClient", _ADVICE)
PyExecutor = unavailable("PyExecutor", _ADVICE)

__all__ = ["GitServerClient", "PyExecutor"]
