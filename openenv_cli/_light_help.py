"""Typer's help renderer without the two rich modules it imports only for other work.

``typer.rich_utils`` (imported to print any help or usage error) starts with
``from rich.markdown import Markdown`` (markdown-it, for ``rich_markup_mode="markdown"``,
which this CLI does not use) and ``from rich.traceback import Traceback`` (Pygments, for
pretty exceptions, which this CLI turns off). Together they are about a third of the time
``openenv --help`` takes. :func:`install` makes the first import of ``typer.rich_utils`` run with
stand-ins for those two names that load the real class the first time they are used, then
takes the stand-in modules out of ``sys.modules``, so any other import gets the real ones.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator, Sequence
from typing import Any

TARGET = "typer.rich_utils"
_DEFERRED = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}


class _Deferred(type):
    """A class standing in for ``module.name``: calling it, or reading an attribute, loads
    the real class and hands over to it."""

    _module: str
    _name: str

    def _real(cls) -> Any:
        return getattr(importlib.import_module(cls._module), cls._name)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._real()(*args, **kwargs)

    def __getattr__(cls, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return getattr(cls._real(), attribute)


@contextlib.contextmanager
def _stand_ins() -> Iterator[None]:
    stand_ins: dict[str, types.ModuleType] = {}
    for module, name in _DEFERRED.items():
        if module in sys.modules:
            continue
        stub = types.ModuleType(module)
        setattr(stub, name, _Deferred(name, (), {"_module": module, "_name": name}))
        stand_ins[module] = stub
    sys.modules.update(stand_ins)
    try:
        yield
    finally:
        for module, stub in stand_ins.items():
            if sys.modules.get(module) is stub:
                del sys.modules[module]


class _LightLoader:
    """Runs ``typer.rich_utils`` with the stand-ins in place."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        module: types.ModuleType | None = self.inner.create_module(spec)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        with _stand_ins():
            self.inner.exec_module(module)


class _Finder:
    """Finds ``typer.rich_utils`` once, when typer first needs it, and loads it lightly."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TARGET:
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _LightLoader(spec.loader)  # type: ignore[assignment]  # duck-typed loader
        return spec


def install() -> None:
    """Load ``typer.rich_utils`` lightly whenever it is first imported (help, usage errors)."""
    if TARGET not in sys.modules and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
