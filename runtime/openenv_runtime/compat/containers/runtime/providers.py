"""The reference's ``openenv.core.containers.runtime.providers``: one-server providers.

``LocalDockerProvider``, ``DockerSwarmProvider`` and ``KubernetesProvider`` carry the
reference's method names over :mod:`openenv_runtime.providers`; the interfaces they share
(``ContainerProvider``, ``RuntimeProvider``) live in :mod:`openenv_runtime.providers.interfaces`.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

from ....providers.base import Provider, wait_until_healthy
from ....providers.docker import DockerProvider, engine_client
from ....providers.interfaces import ContainerProvider, RuntimeProvider
from ....providers.swarm import SWARM_HINT, SwarmProvider


class _ProviderFace(ContainerProvider):
    """A container provider that delegates to one of :mod:`openenv_runtime.providers`."""

    _what = "Container"

    def __init__(self) -> None:
        self._inner: Provider | None = None

    def _make(
        self, image: str, port: int | None, env_vars: dict[str, str] | None, kwargs: dict[str, Any]
    ) -> Provider:
        raise NotImplementedError

    def check_options(self, options: dict[str, Any]) -> None:
        """Raise ``ValueError`` / ``TypeError`` for options ``start_container`` would refuse;
        called before anything starts."""

    @property
    def provider(self) -> Provider | None:
        """The :mod:`openenv_runtime.providers` provider running now (None when stopped)."""
        return self._inner

    @property
    def base_url(self) -> str | None:
        """The running server's base URL, or None."""
        return self._inner.urls[0] if self._inner is not None and self._inner.urls else None

    def start_container(
        self,
        image: str,
        port: int | None = None,
        env_vars: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> str:
        """Start ``image`` and wait until its ``/health`` answers; returns the base URL.

        Raises ``RuntimeError`` (a ``ProviderError``) saying why when it cannot start.
        """
        if self._inner is not None:
            raise RuntimeError(
                f"{type(self).__name__} already runs {self.base_url}; call stop_container() first"
            )
        self.check_options({"port": port, "env_vars": env_vars, **kwargs})
        inner = self._make(image, port, env_vars, dict(kwargs))
        inner.start()
        self._inner = inner
        return inner.urls[0]

    def stop_container(self) -> None:
        inner, self._inner = self._inner, None
        if inner is not None:
            inner.stop()

    def wait_for_ready(self, base_url: str, timeout_s: float = 30.0) -> None:
        wait_until_healthy(base_url, timeout_s, self._what)


class LocalDockerProvider(_ProviderFace):
    """Runs the image as one container of the local Docker engine (``openenv-runtime[docker]``).

    Raises ``RuntimeError`` when no engine answers. ``start_container`` maps ``port`` (the host
    port, default a free one) to the server's port 8000, pulls a missing image (``pull=False``
    to refuse) and also takes the options of
    :class:`~openenv_runtime.providers.DockerProvider` (``cpus``, ``mem_limit``, ``labels``,
    ``pull``, ``container_port``, ``startup_timeout``); other keywords are ignored with a warning.
    """

    _OPTIONS = frozenset(
        {"cpus", "mem_limit", "labels", "pull", "container_port", "startup_timeout", "name_prefix"}
    )

    def __init__(self) -> None:
        super().__init__()
        engine_client(timeout=10).close()

    def _make(
        self, image: str, port: int | None, env_vars: dict[str, str] | None, kwargs: dict[str, Any]
    ) -> Provider:
        unknown = sorted(set(kwargs) - self._OPTIONS)
        if unknown:
            warnings.warn(
                f"LocalDockerProvider ignores {', '.join(unknown)}", RuntimeWarning, stacklevel=4
            )
        # Like `docker run`, which the reference calls: a missing image is pulled.
        options: dict[str, Any] = {"pull": True}
        options.update((key, value) for key, value in kwargs.items() if key in self._OPTIONS)
        return DockerProvider(image, env=env_vars, host_port=port, **options)

    @property
    def container_id(self) -> str | None:
        """The running container's id, or None."""
        inner = self._inner
        return inner.container_ids[0] if isinstance(inner, DockerProvider) else None


class DockerSwarmProvider(_ProviderFace):
    """Runs the image as a replicated service of the local engine's swarm (``[docker]``).

    Args:
        auto_init_swarm: make the engine a one-node swarm when it is not in one (otherwise
            a ``RuntimeError`` says how to).
        overlay_network: attach the tasks to this overlay network, created when missing.

    ``start_container`` takes the reference's keywords ``replicas`` (default 2), ``cpu_limit``,
    ``memory_limit``, ``constraints``, ``labels`` and ``command``, and rejects others. Unlike
    the reference (one port behind the ingress routing mesh), each task publishes its own
    port in host mode: the returned URL is the first task's, ``provider.urls`` lists them
    all, and ``port`` can only be given with ``replicas=1``.
    """

    _what = "Swarm service"
    _OPTIONS = frozenset(
        {"replicas", "cpu_limit", "memory_limit", "constraints", "labels", "command"}
    )

    def __init__(self, *, auto_init_swarm: bool = True, overlay_network: str | None = None) -> None:
        super().__init__()
        self._auto_init_swarm = auto_init_swarm
        self._overlay_network = overlay_network
        client = engine_client(timeout=30)
        try:
            self._ensure_swarm(client)
            if overlay_network:
                self._ensure_network(client, overlay_network)
        finally:
            client.close()

    def _ensure_swarm(self, client: Any) -> None:
        state = client.info().get("Swarm", {}).get("LocalNodeState", "unknown")
        if state == "active":
            return
        if not self._auto_init_swarm:
            raise RuntimeError(f"the Docker engine is not in a swarm (state {state}); {SWARM_HINT}")
        try:
            client.swarm.init()
        except Exception:
            # A host with several addresses needs one named; loopback suits a one-node swarm.
            try:
                client.swarm.init(advertise_addr="127.0.0.1")
            except Exception as exc:
                raise RuntimeError(
                    f"could not make the engine a swarm ({exc}); {SWARM_HINT}"
                ) from None

    @staticmethod
    def _ensure_network(client: Any, name: str) -> None:
        if client.networks.list(names=[name]):
            return
        try:
            client.networks.create(name, driver="overlay", attachable=True)
        except Exception as exc:
            raise RuntimeError(f"could not create overlay network {name!r}: {exc}") from None

    def check_options(self, options: dict[str, Any]) -> None:
        unknown = sorted(set(options) - self._OPTIONS - {"port", "env_vars"})
        if unknown:
            raise ValueError(
                f"Unsupported kwargs for DockerSwarmProvider: {', '.join(unknown)} (it takes "
                f"{', '.join(sorted(self._OPTIONS))}, port and env_vars; nothing was started)"
            )
        replicas = options.get("replicas", 2)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
            raise ValueError(f"replicas must be a whole number of at least 1, not {replicas!r}")
        if options.get("port") is not None and replicas > 1:
            raise ValueError(
                "each swarm task publishes its own host port here; give port only with replicas=1"
            )

    def _make(
        self, image: str, port: int | None, env_vars: dict[str, str] | None, kwargs: dict[str, Any]
    ) -> Provider:
        replicas = int(kwargs.get("replicas", 2))
        command = kwargs.get("command")
        if isinstance(command, str):
            import shlex

            command = shlex.split(command)
        cpu = kwargs.get("cpu_limit")
        return SwarmProvider(
            image,
            replicas=replicas,
            env=env_vars,
            cpus=None if cpu is None else float(cpu),
            mem_limit=kwargs.get("memory_limit"),
            labels=kwargs.get("labels"),
            host_port=port,
            networks=[self._overlay_network] if self._overlay_network else [],
            constraints=list(kwargs.get("constraints") or []),
            command=command,
        )

    def stop_container(self) -> None:
        """Remove the service (the engine stays in the swarm)."""
        with contextlib.suppress(Exception):
            super().stop_container()


class KubernetesProvider(ContainerProvider):
    """Not offered: the reference declares this name without an implementation.

    To run on a cluster, render manifests with ``openenv deploy kubernetes`` and apply them.
    """

    _ADVICE = (
        "KubernetesProvider has no implementation (nor has the reference's); render manifests "
        "with `openenv deploy kubernetes`, apply them, and connect with base_url=..."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(self._ADVICE)

    def start_container(
        self,
        image: str,
        port: int | None = None,
        env_vars: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> str:
        raise NotImplementedError(self._ADVICE)

    def stop_container(self) -> None:
        raise NotImplementedError(self._ADVICE)

    def wait_for_ready(self, base_url: str, timeout_s: float = 30.0) -> None:
        raise NotImplementedError(self._ADVICE)


__all__ = [
    "ContainerProvider",
    "DockerSwarmProvider",
    "KubernetesProvider",
    "LocalDockerProvider",
    "RuntimeProvider",
]
