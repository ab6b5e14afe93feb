"""``AutoEnv`` / ``AutoAction``: environments found by name (the reference's ``openenv.auto``).

Installed environment packages are discovered (:mod:`openenv_runtime.auto._discovery`);
a Hub Space can be connected to, and its package installed only with consent
(:mod:`openenv_runtime.auto.auto_env`).
"""

from ._discovery import EnvironmentDiscovery, EnvironmentInfo, get_discovery, reset_discovery
from .auto_action import AutoAction
from .auto_env import AutoEnv

__all__ = [
    "AutoAction",
    "AutoEnv",
    "EnvironmentDiscovery",
    "EnvironmentInfo",
    "get_discovery",
    "reset_discovery",
]
