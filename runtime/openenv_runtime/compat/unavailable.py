"""Stand-ins for reference names whose machinery this runtime does not carry.

They import fine (so a ported module loads) and say, when used, what to use instead.
"""

from __future__ import annotations

from typing import Any, NoReturn


def unavailable(name: str, advice: str) -> type:
    """A class named ``name`` whose construction (or any class-method call) raises with ``advice``."""

    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise NotImplementedError(f"{name} is not part of openenv-runtime. {advice}")

    class Meta(type):
        def __getattr__(cls, attr: str) -> Any:
            if attr.startswith("__"):
                raise AttributeError(attr)
            return refuse

    return Meta(name, (), {"__init__": refuse, "__doc__": f"Not offered here. {advice}"})
