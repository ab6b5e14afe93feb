"""What ``create_app`` checks in its arguments, and where it finds the environment's README."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args, get_origin

from openenv_runtime.environment import Environment
from openenv_runtime.errors import EnvironmentContractError
from openenv_runtime.models import Action, Observation, State
from openenv_runtime.server.running.env_class import ClassAdapter


def declared_models(env_cls: type | None) -> tuple[type | None, type | None, type | None]:
    """The action, observation and state classes a class declares as ``Environment[A, O, S]``.

    ``None`` for a factory, and where a parameter is left generic (a ``TypeVar``, ``Any``).
    """
    bases = (Action, Observation, State)
    for klass in env_cls.__mro__ if env_cls is not None else ():
        for base in getattr(klass, "__orig_bases__", ()):
            origin = get_origin(base)
            if isinstance(origin, type) and issubclass(origin, Environment):
                found: list[type | None] = [
                    arg if isinstance(arg, type) and issubclass(arg, model) else None
                    for arg, model in zip(get_args(base), bases, strict=False)
                ]
                found += [None] * (3 - len(found))
                return found[0], found[1], found[2]
    return None, None, None


def check_env(env: Any) -> tuple[Callable[[], Any], type | None]:
    if isinstance(env, type):
        ClassAdapter(env)  # raises EnvironmentContractError with what to add
        return env, env
    if callable(env) and not hasattr(env, "step"):
        return env, None
    cls = type(env).__qualname__
    raise EnvironmentContractError(
        f"create_app()'s environment must be a callable that makes one instance per session (a "
        f"class or a factory), got an instance of {cls}: pass the class, create_app({cls}, ...), or for "
        f"arguments a factory, create_app(lambda: {cls}(...), ...)."
    )


def check_model(cls: Any, base: type, param: str) -> None:
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise EnvironmentContractError(
            f"{param} must be a subclass of openenv_runtime.{base.__name__}, got {cls!r}. "
            f"Define e.g. `class MyThing({base.__name__}): ...` in models.py and pass the class."
        )


def first_line(doc: str | None) -> str | None:
    return doc.strip().splitlines()[0] if doc and doc.strip() else None


def readme_text(readme: str | Path | None, owner: Any) -> str | None:
    if isinstance(readme, Path) or (
        isinstance(readme, str) and "\n" not in readme and readme.endswith(".md")
    ):
        path = Path(readme)
        return path.read_text(encoding="utf-8") if path.is_file() else None
    if isinstance(readme, str):
        return readme
    try:
        here = Path(inspect.getfile(owner)).resolve().parent
    except (TypeError, OSError):
        return None
    for folder in (here, here.parent, here.parent.parent):
        candidate = folder / "README.md"
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    return None
