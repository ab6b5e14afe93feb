"""``DockerProvider``: replicas as containers of an image, on free host ports of the local engine.

Needs the Docker SDK: ``pip install 'openenv-runtime[docker]'``.

Every container carries the labels ``org.openenv.provider=docker`` and
``org.openenv.provider.run=<run id>``, and a name starting with ``name_prefix``; ``stop()``
removes what carries this provider's run id, so a container whose creation was interrupted
(Ctrl-C between the engine's reply and ours) is removed too.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping
from typing import Any

from .base import Provider, ProviderError, last_lines, missing_extra

LABEL = "org.openenv.provider"
RUN_LABEL = "org.openenv.provider.run"
ENGINE_HINT = (
    "start it (e.g. `sudo systemctl start docker`) or point DOCKER_HOST at a running engine"
)


def docker_module() -> Any:
    try:
        import docker
    except ImportError:
        raise missing_extra("docker", "docker") from None
    return docker


def engine_client(timeout: int = 120) -> Any:
    """A client of the local engine, or a ProviderError saying how to get one."""
    docker = docker_module()
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:
        raise ProviderError(f"no Docker engine answers ({exc}); {ENGINE_HINT}") from None
    return client


def ensure_image(client: Any, image: str, pull: bool) -> None:
    """The image exists locally (pulled first when ``pull`` and it does not)."""
    docker = docker_module()
    try:
        client.images.get(image)
        return
    except docker.errors.ImageNotFound:
        pass
    if pull:
        try:
            client.images.pull(image)
            return
        except docker.errors.APIError as exc:
            reason = exc.explanation or str(exc)
            raise ProviderError(
                f"image {image} is not on this engine and pulling it failed ({reason}); "
                "build it with `openenv build` in the environment's project folder (or pass "
                "another image), or `docker login` for a private registry"
            ) from None
    raise ProviderError(
        f"image {image} is not on this engine; build it with `openenv build` in the "
        f"environment's project folder (it tags <name>:<version> and <name>:latest), pass "
        f"the image you built (docker_image=...), or `docker pull {image}`"
    )


class DockerProvider(Provider):
    """Run ``replicas`` containers of ``image``, each publishing the server port on 127.0.0.1.

    Args:
        image: the image (e.g. one that ``openenv build`` made).
        replicas: containers to start.
        env: environment variables for the containers (e.g. ``MAX_CONCURRENT_ENVS``).
        container_port: the port the server listens on inside (the image's ``PORT``, 8000).
        host_port: the first replica's host port (the next ones count up); default: the
            engine picks free ones.
        cpus: CPU limit per container (e.g. ``1.5``); mem_limit: memory limit (``"1g"``).
        labels: extra labels; the provider adds its own (see the module docs).
        name_prefix: container names are ``<prefix>-<run id>-<index>``.
        pull: pull the image when it is not present locally.
        startup_timeout: seconds allowed for every ``/health`` to answer.
    """

    def __init__(
        self,
        image: str,
        *,
        replicas: int = 1,
        env: Mapping[str, str] | None = None,
        container_port: int = 8000,
        host_port: int | None = None,
        host: str = "127.0.0.1",
        cpus: float | None = None,
        mem_limit: str | int | None = None,
        labels: Mapping[str, str] | None = None,
        name_prefix: str = "openenv",
        pull: bool = False,
        startup_timeout: float = 120.0,
    ) -> None:
        super().__init__()
        if replicas < 1:
            raise ProviderError("replicas must be at least 1")
        self.image = image
        self.replicas = replicas
        self.env = dict(env or {})
        self.container_port = container_port
        self.host_port = host_port
        self.host = host
        self.cpus = cpus
        self.mem_limit = mem_limit
        self.run_id = uuid.uuid4().hex[:12]
        self.labels = {**(labels or {}), LABEL: "docker", RUN_LABEL: self.run_id}
        self.name_prefix = name_prefix
        self.pull = pull
        self.startup_timeout = startup_timeout
        self.containers: list[Any] = []
        self._client: Any = None

    @property
    def container_ids(self) -> list[str]:
        return [c.id for c in self.containers]

    def _launch(self) -> list[str]:
        docker = docker_module()
        self._client = engine_client()
        ensure_image(self._client, self.image, self.pull)
        env = {"HOST": "0.0.0.0", "PORT": str(self.container_port), **self.env}
        urls = []
        for index in range(self.replicas):
            published = None if self.host_port is None else self.host_port + index
            options: dict[str, Any] = {
                "name": f"{self.name_prefix}-{self.run_id}-{index}",
                "detach": True,
                "environment": env,
                "labels": self.labels,
                "ports": {f"{self.container_port}/tcp": (self.host, published)},
                "init": True,
            }
            if self.cpus is not None:
                options["nano_cpus"] = int(self.cpus * 1e9)
            if self.mem_limit is not None:
                options["mem_limit"] = self.mem_limit
            try:
                container = self._client.containers.run(self.image, **options)
            except docker.errors.APIError as exc:
                reason = exc.explanation or str(exc)
                if "port is already allocated" in reason or "address already in use" in reason:
                    raise ProviderError(
                        f"host port {published} is taken; pass another host_port= "
                        "or leave it out to let the engine pick free ones"
                    ) from None
                raise ProviderError(f"the engine refused to start {self.image}: {reason}") from None
            self.containers.append(container)
            urls.append(f"http://{self.host}:{self._host_port(container)}")
        return urls

    def _host_port(self, container: Any) -> int:
        for _ in range(50):
            container.reload()
            bindings = (container.attrs.get("NetworkSettings") or {}).get("Ports") or {}
            for binding in bindings.get(f"{self.container_port}/tcp") or []:
                if binding.get("HostPort"):
                    return int(binding["HostPort"])
            if container.status not in ("created", "running"):
                break
        raise ProviderError(self._exited(container) or f"{container.name} published no port")

    def _exited(self, container: Any) -> str | None:
        container.reload()
        if container.status in ("created", "running", "restarting"):
            return None
        state = container.attrs.get("State") or {}
        logs = container.logs(tail=30).decode("utf-8", "replace")
        return (
            f"container {container.name} ({self.image}) exited with code "
            f"{state.get('ExitCode')} before answering /health; its last lines:\n"
            f"{last_lines(logs)}"
        )

    def _check_alive(self, index: int) -> str | None:
        return self._exited(self.containers[index])

    def logs(self, index: int, tail: int = 100) -> str:
        return str(self.containers[index].logs(tail=tail).decode("utf-8", "replace"))

    def _teardown(self) -> None:
        client = self._client
        if client is None:
            return
        docker = docker_module()
        found = client.containers.list(
            all=True, filters={"label": f"{RUN_LABEL}={self.run_id}"}, ignore_removed=True
        )
        for container in {c.id: c for c in [*self.containers, *found]}.values():
            # NotFound, or a removal already in progress: either way it is going.
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
        self.containers = []
        client.close()
        self._client = None
