"""Alias of the reference's ``openenv.core.containers.runtime``.

The reference's container providers start a server for the client. Here a server is
started by ``openenv serve``, ``openenv build`` + ``docker run``, or a Space; pass its URL
as ``base_url``. These names import, and say so when used.
"""

from ..compat.unavailable import unavailable

_ADVICE = (
    "Start the environment with `openenv serve` (or `openenv build` and `docker run`) and "
    "connect with base_url='http://127.0.0.1:8000'."
)
ContainerProvider = unavailable("ContainerProvider", _ADVICE)
LocalDockerProvider = unavailable("LocalDockerProvider", _ADVICE)
DockerSwarmProvider = unavailable("DockerSwarmProvider", _ADVICE)
KubernetesProvider = unavailable("KubernetesProvider", _ADVICE)
RuntimeProvider = unavailable("RuntimeProvider", _ADVICE)
UVProvider = unavailable("UVProvider", _ADVICE)
DaytonaProvider = unavailable("DaytonaProvider", _ADVICE)

__all__ = [
    "ContainerProvider",
    "DaytonaProvider",
    "DockerSwarmProvider",
    "KubernetesProvider",
    "LocalDockerProvider",
    "RuntimeProvider",
    "UVProvider",
]
