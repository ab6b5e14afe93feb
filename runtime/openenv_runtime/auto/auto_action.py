"""``AutoAction``: an installed environment's action class, found by name."""

from __future__ import annotations

from typing import Any

from ..client.generic import GenericAction
from ._discovery import EnvironmentInfo, get_discovery
from .auto_env import AutoEnv, _import_class


def _find(name: str) -> EnvironmentInfo:
    info = get_discovery().get_environment_by_name(name)
    if info is None:
        known = ", ".join(sorted(get_discovery().discover()))
        if not known:
            raise ValueError(
                f"Unknown environment {name!r}: No OpenEnv environments found "
                "(pip install openenv-<name>)."
            )
        raise ValueError(f"Unknown environment {name!r}. Installed: {known}")
    return info


class AutoAction:
    """``AutoAction.from_env("echo")`` → the installed echo environment's action class.

    A Hub id (``org/name``) installs the Space's package first, with consent (see
    :class:`AutoEnv`); ``skip_install=True`` gives :class:`GenericAction` (a dict-like
    action) without installing anything.
    """

    def __init__(self) -> None:
        raise TypeError(
            "AutoAction is a factory class: use AutoAction.from_env() (or AutoAction.from_hub())"
        )

    @classmethod
    def from_env(
        cls, name: str, trust_remote_code: bool = False, skip_install: bool = False
    ) -> type[Any]:
        """The action class of environment ``name``."""
        if skip_install:
            return GenericAction
        name = AutoEnv.installed_name(name, trust_remote_code=trust_remote_code)
        return _import_class(_find(name), "action")

    from_hub = from_env

    @classmethod
    def get_action_info(cls, name: str) -> dict[str, Any]:
        """The action class of ``name`` and where it lives."""
        info = _find(name)
        return {
            "env_key": info.env_key,
            "env_name": info.name,
            "package": info.package_name,
            "action_class": info.action_class_name,
            "observation_class": info.observation_class_name,
            "module": info.client_module_path,
        }

    @classmethod
    def list_actions(cls) -> None:
        """Print each installed environment's action class."""
        environments = get_discovery().discover()
        print("Available Action Classes:")
        print("-" * 70)
        if not environments:
            print("  No OpenEnv environments found: pip install openenv-<name>.")
        for key in sorted(environments):
            info = environments[key]
            print(f"  {key:<15}: {info.action_class_name}")
            print(f"                   Module: {info.client_module_path}")
        print("-" * 70)
        print(f"Total: {len(environments)} action classes")


__all__ = ["AutoAction", "AutoEnv"]
