"""The one home of the ``FAMILY:NAME[?key=value&...]`` target syntax.

``gymnasium:CartPole-v1``, ``reasoning_gym:leg_counting?size=500&seed=3``,
``textarena:Wordle-v0``, ``harbor:/abs/path/to/task``, ``verifiers:my_taskset``: a known
family prefix, the library's own name of an environment, and options for it as a URL query
(quote the whole target in a shell). A known family prefix wins over ``MODULE:APP``
(``gymnasium`` is itself importable) and over Docker image names.

Each family is a module of :mod:`openenv_runtime.adapters` with
``load(name, options) -> AdaptedEnvironment``, imported only when a target of that family is
loaded; its library is the ``openenv-runtime`` extra of the same name.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast
from urllib.parse import parse_qsl

from ..environment import Environment
from ..errors import AdapterError
from ..models import Action, Observation, State

if TYPE_CHECKING:
    from fastapi import FastAPI


@dataclass(frozen=True)
class Family:
    """A family of environments: the adapter module, the extra to install, its package."""

    module: str
    extra: str
    package: str  # the distribution whose absence means "install the extra"


FAMILIES: dict[str, Family] = {
    "gymnasium": Family("openenv_runtime.adapters.gymnasium", "gymnasium", "gymnasium"),
    "reasoning_gym": Family(
        "openenv_runtime.adapters.reasoning_gym", "reasoning-gym", "reasoning_gym"
    ),
    "textarena": Family("openenv_runtime.adapters.textarena", "textarena", "textarena"),
    # a Harbor task folder, run in containers on the local Docker engine
    "harbor": Family("openenv_runtime.adapters.harbor", "harbor", "docker"),
    "verifiers": Family("openenv_runtime.adapters.verifiers", "verifiers", "verifiers"),
}


@dataclass(frozen=True)
class FamilyTarget:
    """A parsed ``FAMILY:NAME[?key=value&...]`` target."""

    family: str
    name: str
    options: dict[str, str]

    def __str__(self) -> str:
        from urllib.parse import urlencode

        query = f"?{urlencode(self.options)}" if self.options else ""
        return f"{self.family}:{self.name}{query}"


@dataclass(frozen=True)
class AdaptedEnvironment:
    """What a family's ``load`` returns: everything ``create_app`` needs, and where it came from."""

    factory: Callable[[], Environment[Any, Any, Any]]
    action_cls: type[Action]
    observation_cls: type[Observation]
    state_cls: type[State]
    name: str
    description: str
    package: str  # the distribution name, e.g. "gymnasium"
    package_version: str
    # Called once when the server stops (after its sessions are closed), e.g. to remove
    # containers the family started ahead of sessions.
    shutdown: Callable[[], None] | None = None


class FamilyModule(Protocol):
    """What every family module provides."""

    def load(self, name: str, options: Mapping[str, str]) -> AdaptedEnvironment: ...


def parse_family_target(text: str) -> FamilyTarget | None:
    """``text`` as a family target, or None when it does not start with a known ``FAMILY:``.

    Raises :class:`AdapterError` for a known family with no name (``gymnasium:``) or a
    malformed query.
    """
    family, sep, rest = text.strip().partition(":")
    if not sep or family not in FAMILIES:
        return None
    name, _, query = rest.partition("?")
    name = name.strip()
    if not name:
        raise AdapterError(
            f"{text!r} names no environment: write {family}:NAME, e.g. {_EXAMPLES[family]}."
        )
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as exc:
        raise AdapterError(
            f"The options of {text!r} are not a URL query ({exc}): write "
            f"{family}:{name}?key=value&key2=value2."
        ) from None
    options: dict[str, str] = {}
    for key, value in pairs:
        if key in options:
            raise AdapterError(f"Option {key!r} is given twice in {text!r}: give it once.")
        options[key] = value
    return FamilyTarget(family=family, name=name, options=options)


_EXAMPLES = {
    "gymnasium": "gymnasium:CartPole-v1",
    "reasoning_gym": "reasoning_gym:leg_counting?size=500&seed=3",
    "textarena": "textarena:Wordle-v0",
    "harbor": "harbor:/abs/path/to/task",
    "verifiers": "verifiers:my_taskset?num_tasks=100",
}


def family_module(family: str) -> FamilyModule:
    """The adapter module of ``family``, imported now; one clear error when its extra is missing."""
    spec = FAMILIES[family]
    try:
        importlib.import_module(spec.package)
    except ImportError as exc:
        raise _missing_extra(family, str(exc)) from None
    return cast(FamilyModule, importlib.import_module(spec.module))


def require_family(family: str) -> None:
    """Raise the missing-extra error unless ``family``'s package is installed, without importing it.

    For a process that only starts a server of the family (the server imports it).
    """
    package = FAMILIES[family].package
    try:
        found = importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise _missing_extra(family, f"No module named {package!r}")


def _missing_extra(family: str, reason: str) -> AdapterError:
    spec = FAMILIES[family]
    return AdapterError(
        f"{family} targets need the {spec.package!r} package ({reason}): "
        f'pip install "openenv-runtime[{spec.extra}]"'
    )


def load_family(target: FamilyTarget) -> AdaptedEnvironment:
    """The environment ``target`` names, adapted (its family's package imported now)."""
    return family_module(target.family).load(target.name, target.options)


def as_family_target(target: FamilyTarget | str) -> FamilyTarget:
    """``target`` parsed when it is a string; an error when it names no known family."""
    if isinstance(target, FamilyTarget):
        return target
    parsed = parse_family_target(target)
    if parsed is None:
        known = ", ".join(f"{name}:" for name in FAMILIES)
        raise AdapterError(f"{target!r} is not a family target: start it with one of {known}.")
    return parsed


def create_family_app(target: FamilyTarget | str) -> FastAPI:
    """The server app of a family target, e.g. ``create_family_app("gymnasium:CartPole-v1")``."""
    from openenv_runtime.server.app import create_app

    from ..wire import EnvironmentMetadata

    adapted = load_family(as_family_target(target))
    app = create_app(
        adapted.factory,
        adapted.action_cls,
        adapted.observation_cls,
        adapted.state_cls,
        metadata=EnvironmentMetadata(
            name=adapted.name,
            description=adapted.description,
            version=adapted.package_version,
        ),
    )
    if adapted.shutdown is not None:
        _shut_down_with(app, adapted.shutdown)
    return app


def _shut_down_with(app: FastAPI, shutdown: Callable[[], None]) -> None:
    """Run ``shutdown`` (in a thread) when ``app``'s lifespan ends, after the app's own end."""
    import asyncio
    import contextlib

    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(given: Any) -> Any:
        try:
            async with inner(given) as state:
                yield state
        finally:
            await asyncio.to_thread(shutdown)

    app.router.lifespan_context = lifespan
