"""openenv-runtime: serve an RL environment over the OpenEnv protocol, and talk to one.

Environment side::

    from openenv_runtime import Action, Observation, State, Environment, create_app

Client side::

    from openenv_runtime import EnvClient, EnvPool, StepResult, EnvError

Servers started for you: :mod:`openenv_runtime.providers`. Finding and installing
environments: :mod:`openenv_runtime.auto`.

Coming from the reference OpenEnv: its ``openenv.core`` lives, path for path, in
:mod:`openenv_runtime.compat` (``openenv migrate`` renames the imports).
"""

from typing import TYPE_CHECKING

from ._version import __version__
from .client import DictObservation, EnvClient, GenericEnvClient, SyncEnvClient
from .client.checkpoint import Checkpoint
from .client.pool import EnvPool
from .client.sync import SyncEnvPool
from .environment import Environment
from .errors import EnvError, EnvironmentContractError
from .models import Action, Observation, State, StepResult

if TYPE_CHECKING:
    from openenv_runtime.server import create_app


def __getattr__(name: str) -> object:
    # The server (FastAPI, uvicorn) loads on first use of create_app: a trainer that only
    # connects never imports it.
    if name == "create_app":
        from openenv_runtime.server import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Action",
    "Checkpoint",
    "DictObservation",
    "EnvClient",
    "EnvError",
    "EnvPool",
    "Environment",
    "EnvironmentContractError",
    "GenericEnvClient",
    "Observation",
    "State",
    "StepResult",
    "SyncEnvClient",
    "SyncEnvPool",
    "__version__",
    "create_app",
]
