"""The app of a family target, by import path: what ``python -m openenv_runtime.serve
gymnasium:CartPole-v1`` (and each of its workers) imports.

:func:`served_app` records the target in ``OPENENV_FAMILY_TARGET``, which worker processes
inherit, and returns this module's ``app`` path; the app is built on first access.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

from ..errors import AdapterError
from .target import FamilyTarget, as_family_target, create_family_app, family_module, require_family

if TYPE_CHECKING:
    from fastapi import FastAPI

    from ..providers.process import ProcessProvider

FAMILY_TARGET_VARIABLE = "OPENENV_FAMILY_TARGET"
APP_PATH = f"{__name__}:app"


def served_app(target: FamilyTarget) -> str:
    """Serve ``target`` from this process and its workers; returns the app's import path.

    Imports the family's package now, so a missing extra is one clear error before the server
    starts.
    """
    family_module(target.family)
    os.environ[FAMILY_TARGET_VARIABLE] = str(target)
    return APP_PATH


def family_provider(target: FamilyTarget | str, **options: Any) -> ProcessProvider:
    """A :class:`~openenv_runtime.providers.ProcessProvider` serving ``target`` in local processes.

    ``options`` are the provider's (``workers=4``, ``replicas=2``, ``env={...}``). The family's
    package is looked up, not imported, here (the servers import it): a missing extra is one
    clear error before anything starts. With a client::

        env = GenericEnvClient.from_provider(family_provider("gymnasium:CartPole-v1"))
    """
    from ..providers.process import ProcessProvider

    parsed = as_family_target(target)
    require_family(parsed.family)
    env = {**dict(options.pop("env", None) or {}), FAMILY_TARGET_VARIABLE: str(parsed)}
    return ProcessProvider(APP_PATH, env=env, **options)


@functools.cache
def _app(target: str) -> FastAPI:
    return create_family_app(target)


def __getattr__(name: str) -> Any:
    if name == "app":
        target = os.environ.get(FAMILY_TARGET_VARIABLE)
        if not target:
            raise AdapterError(
                f"{APP_PATH} serves the family target in {FAMILY_TARGET_VARIABLE}, which is "
                "unset: run `python -m openenv_runtime.serve FAMILY:NAME` or "
                "`openenv serve FAMILY:NAME`."
            )
        return _app(target)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
