"""What the server learns once about an environment class: its methods, sync or ``async``."""

from __future__ import annotations

import inspect
from typing import Any

from openenv_runtime.environment import (
    Environment,
    contract_error_message,
    missing_members,
    overrides,
)
from openenv_runtime.errors import EnvironmentContractError
from openenv_runtime.server.running.call_cost import LifecycleCost
from openenv_runtime.server.running.step_placement import StepPlacement


class EnvMethod:
    """One environment method, bound later to an instance."""

    __slots__ = ("accepts_any_kw", "is_async", "kw_names", "name")

    def __init__(self, cls: type, name: str) -> None:
        func = getattr(cls, name)
        self.name = name
        self.is_async = inspect.iscoroutinefunction(func)
        try:
            params: list[inspect.Parameter] = list(inspect.signature(func).parameters.values())
        except (TypeError, ValueError):
            params = []
        self.accepts_any_kw = any(p.kind is p.VAR_KEYWORD for p in params) or not params
        self.kw_names = frozenset(
            p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        )

    def filter_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.accepts_any_kw:
            return kwargs
        return {k: v for k, v in kwargs.items() if k in self.kw_names}


class ClassAdapter:
    """What the server needs to know about one environment class."""

    def __init__(self, cls: type) -> None:
        missing = missing_members(cls) if issubclass(cls, Environment) else _duck_missing(cls)
        if missing:
            raise EnvironmentContractError(contract_error_message(cls, missing))
        self.cls = cls
        self.reset = EnvMethod(cls, "reset_async" if _overrides(cls, "reset_async") else "reset")
        self.step = EnvMethod(cls, "step_async" if _overrides(cls, "step_async") else "step")
        self.step_placement = StepPlacement()  # a plain step: pool, or inline once proven cheap
        # an MCP tool answered by a plain step (server/mcp.py): likewise, learnt apart, so cheap
        # steps never pull a slow tool inline and a slow tool never sends cheap steps to the pool
        self.tool_placement = StepPlacement()
        # a vector session's plain resets (EnvRunner.reset_many): likewise
        self.reset_placement = StepPlacement()
        close = getattr(cls, "close", None)
        # The base class's close() does nothing: skip the call (and its thread hop) entirely.
        self.close = (
            EnvMethod(cls, "close") if callable(close) and close is not Environment.close else None
        )
        self.close_cost = LifecycleCost()
        state_attr = inspect.getattr_static(cls, "state")
        if isinstance(state_attr, property):
            self.state_is_property = True
            self.state_is_async = inspect.iscoroutinefunction(state_attr.fget)
        else:
            self.state_is_property = False
            self.state_is_async = inspect.iscoroutinefunction(state_attr)
        self.supports_concurrent_sessions = bool(
            getattr(cls, "SUPPORTS_CONCURRENT_SESSIONS", False)
        )


def _overrides(cls: type, name: str) -> bool:
    return overrides(cls, name)


def _duck_missing(cls: type) -> list[str]:
    return [m for m in ("reset", "step", "state") if not hasattr(cls, m)]
