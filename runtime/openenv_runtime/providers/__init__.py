"""Start environment servers anywhere, get their base URLs, and always stop them.

``ProcessProvider`` (local processes), ``DockerProvider`` (containers; extra ``[docker]``),
``SwarmProvider`` (a swarm service; extra ``[docker]``), ``RayProvider`` (Ray actors; extra
``[ray]``) and ``SpaceProvider`` (a running Hugging Face Space). Each has ``start() ->
list[str]``, an idempotent ``stop()``, and works with ``with`` and ``async with``::

    with DockerProvider("my-env:latest", replicas=2) as urls:
        pool = EnvPool(MyEnv, urls=urls, size=64)
"""

from .base import Provider, ProviderError
from .docker import DockerProvider
from .process import ProcessProvider
from .ray import RayProvider
from .space import SpaceProvider, space_image, space_url
from .swarm import SwarmProvider

__all__ = [
    "DockerProvider",
    "ProcessProvider",
    "Provider",
    "ProviderError",
    "RayProvider",
    "SpaceProvider",
    "SwarmProvider",
    "space_image",
    "space_url",
]
