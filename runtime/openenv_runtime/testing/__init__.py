"""Helpers for testing an environment through a real server: ``running_server``,
``free_port``, and ``StubLLM`` (the stand-in model server, imported on first use)."""

from __future__ import annotations

from typing import Any

from .running import free_port, running_server

__all__ = ["StubLLM", "StubReply", "StubTokenizer", "free_port", "running_server"]


def __getattr__(name: str) -> Any:
    """``StubLLM`` and friends, the stand-in model server, imported on first use."""
    if name in ("StubLLM", "StubReply", "StubTokenizer"):
        from . import stub_llm

        return getattr(stub_llm, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
