"""The reference's ``openenv.core.containers.runtime``: one-server providers with its method names.

``LocalDockerProvider().start_container(image, port=..., env_vars=...)`` and
``wait_for_ready(url)`` / ``stop_container()``; ``DockerSwarmProvider`` (a swarm service);
``UVProvider(project_path=...)`` with ``start()`` / ``wait_for_ready()`` / ``stop()``. Each is a
thin face over :mod:`openenv_runtime.providers`, and each can be passed as ``provider=`` to
``from_docker_image`` (container providers) or owned by a client (closing it stops them).
"""

from .daytona_provider import DaytonaProvider
from .providers import (
    ContainerProvider,
    DockerSwarmProvider,
    KubernetesProvider,
    LocalDockerProvider,
    RuntimeProvider,
)
from .uv_provider import UVProvider

__all__ = [
    "ContainerProvider",
    "DaytonaProvider",
    "DockerSwarmProvider",
    "KubernetesProvider",
    "LocalDockerProvider",
    "RuntimeProvider",
    "UVProvider",
]
