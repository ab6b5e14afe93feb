"""``ContainerProvider`` and ``RuntimeProvider``: one-server provider interfaces.

They carry the reference's method names. A container provider runs one image:
``start_container(image, port=None, env_vars=None, **kwargs)`` returns the server's base URL,
``wait_for_ready(base_url, timeout_s)`` polls its ``/health``, ``stop_container()`` removes what
was started. A runtime provider runs a project without an image: ``start(port=None,
env_vars=None, **kwargs)``, ``wait_for_ready(timeout_s)``, ``stop()``. Both also have
``stop()``, so a client that owns one stops it when it closes. ``from_docker_image`` takes
either; :mod:`openenv_runtime.compat.containers.runtime` has the reference's named providers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Literal


class ContainerProvider(ABC):
    """Runs one server from an image and hands back its base URL (the reference's interface)."""

    @abstractmethod
    def start_container(
        self,
        image: str,
        port: int | None = None,
        env_vars: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> str:
        """Start ``image``; ``port`` is the host port (None: a free one). Returns the base URL."""

    @abstractmethod
    def stop_container(self) -> None:
        """Stop and remove what ``start_container`` started; does nothing when nothing runs."""

    @abstractmethod
    def wait_for_ready(self, base_url: str, timeout_s: float = 30.0) -> None:
        """Wait until ``base_url/health`` answers 200; ``TimeoutError`` when it does not in time."""

    def stop(self) -> None:
        """Same as :meth:`stop_container` (what a client owning this provider calls on close)."""
        self.stop_container()


class RuntimeProvider(ABC):
    """Runs one server without an image (the reference's interface; see ``UVProvider``).

    Usable with ``with``: entering starts it, leaving stops it.
    """

    @abstractmethod
    def start(
        self, port: int | None = None, env_vars: dict[str, str] | None = None, **kwargs: Any
    ) -> str:
        """Start the server; returns its base URL."""

    @abstractmethod
    def stop(self) -> None:
        """Stop the server; does nothing when it does not run."""

    @abstractmethod
    def wait_for_ready(self, timeout_s: float = 30.0) -> None:
        """Wait until the server's ``/health`` answers; ``TimeoutError`` when it does not."""

    def __enter__(self) -> RuntimeProvider:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> Literal[False]:
        self.stop()
        return False
