"""``AutoEnv`` / ``AutoAction``: an environment's client and action class, found by name.

``AutoEnv.from_env("echo", base_url=...)`` imports the installed environment package
(``echo_env`` or ``echo``) and builds its client; a Hub repository id (``org/echo_env``)
or Space URL connects a :class:`GenericEnvClient` to its Space (remote code is never
installed or run here; install the package yourself to get typed classes).
"""

from __future__ import annotations

import importlib
import inspect
import re
from types import ModuleType
from typing import Any

from ..models import Action
from .env_client import EnvClient
from .generic import GenericAction, GenericEnvClient

_HUB = re.compile(r"^(?:https?://huggingface\.co/spaces/)?([\w.-]+)/([\w.-]+)/?$")


def _module_names(name: str) -> list[str]:
    base = re.sub(r"[^0-9a-zA-Z_]", "_", name.strip().lower())
    base = base.removeprefix("openenv_")
    names = [base] if base.endswith("_env") else [f"{base}_env", base]
    return names


def _import_env_package(name: str) -> ModuleType:
    tried = []
    for module in _module_names(name):
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            tried.append(module)
    raise ModuleNotFoundError(
        f"no environment package named {' or '.join(tried)} is installed; `pip install` it "
        "(e.g. from its Space: pip install git+https://huggingface.co/spaces/ORG/NAME), or pass "
        "a Hub id 'org/name' to connect to its Space."
    )


def _pick(module: ModuleType, base: type, what: str) -> Any:
    found = [
        value
        for value in vars(module).values()
        if inspect.isclass(value)
        and issubclass(value, base)
        and value is not base
        and value.__module__.startswith(module.__name__)
    ]
    if not found:
        raise LookupError(f"{module.__name__} exports no {what} (a subclass of {base.__name__})")
    return found[0]


def space_url(repo_id: str) -> str:
    """``org/my_env`` → ``https://org-my-env.hf.space``."""
    owner, name = repo_id.split("/", 1)
    return f"https://{owner}-{name}".lower().replace("_", "-").replace(".", "-") + ".hf.space"


class AutoEnv:
    """Builds the client of an environment from its name; see the module docstring."""

    def __init__(self) -> None:
        raise TypeError("use AutoEnv.from_env(name, base_url=...)")

    @classmethod
    def get_env_class(cls, name: str) -> type[EnvClient[Any, Any, Any]]:
        """The client class of the installed environment package ``name``."""
        return _pick(_import_env_package(name), EnvClient, "client class")  # type: ignore[no-any-return]

    @classmethod
    def from_env(
        cls, name: str, base_url: str | None = None, skip_install: bool = False, **kwargs: Any
    ) -> EnvClient[Any, Any, Any]:
        """A client for ``name`` at ``base_url`` (or at its Space for a Hub id)."""
        hub = _HUB.match(name) if "/" in name else None
        if hub is not None:
            url = base_url or space_url(f"{hub.group(1)}/{hub.group(2)}")
            if not skip_install:
                try:
                    return cls.get_env_class(hub.group(2))(url, **kwargs)
                except ModuleNotFoundError:
                    pass
            return GenericEnvClient(url, **kwargs)
        if base_url is None:
            raise ValueError(
                f"AutoEnv.from_env({name!r}) needs base_url=: start the server with `openenv serve` "
                "(or docker run) and pass its URL (with skip_install=True for a GenericEnvClient)."
            )
        if skip_install:
            return GenericEnvClient(base_url, **kwargs)
        return cls.get_env_class(name)(base_url, **kwargs)

    from_hub = from_env


class AutoAction:
    """The action class of an installed environment package, by name."""

    def __init__(self) -> None:
        raise TypeError("use AutoAction.from_env(name)")

    @classmethod
    def from_env(cls, name: str, skip_install: bool = False) -> type[Any]:
        """The package's action class; with ``skip_install=True``, :class:`GenericAction` (dicts)."""
        if skip_install:
            return GenericAction
        module = _import_env_package(name.split("/")[-1])
        return _pick(module, Action, "action class")  # type: ignore[no-any-return]

    from_hub = from_env
