"""``SwarmProvider``: a replicated Docker Swarm service, one URL per task.

Needs the Docker SDK (``pip install 'openenv-runtime[docker]'``) and an engine in a swarm
(``docker swarm init --advertise-addr <ip>``; one node is enough). Each task publishes the
server port in *host* mode on a port the engine picks, so every replica has its own URL
and no ingress routing mesh is needed (it balances connections blindly anyway, while a
pool wants to know which server holds which session).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from .base import Provider, ProviderError, last_lines
from .docker import LABEL, RUN_LABEL, docker_module, engine_client, ensure_image

SWARM_HINT = "make this engine a swarm: `docker swarm init --advertise-addr 127.0.0.1`"
# Engines from 25 (API 1.44) take a health check's start interval: probes that often during
# the start period, so a task is seen healthy (and "running") a second after its server is.
START_INTERVAL_API = (1, 44)
START_INTERVAL_NS = 1_000_000_000
# A task in one of these states has ended on its own (the restart policy is "none").
FAILED = ("failed", "rejected", "complete", "orphaned")


class SwarmProvider(Provider):
    """Run ``image`` as a swarm service of ``replicas`` tasks; :meth:`scale` changes their number.

    Args:
        image: the image; on a multi-node swarm every node must be able to get it.
        replicas: tasks of the service.
        env: environment variables; cpus / mem_limit: limits per task (``mem_limit`` in bytes
            or like ``"512m"``).
        container_port: the server's port inside the container (8000).
        host: the address the URLs use to reach the nodes' published ports.
        labels: extra service labels; name_prefix: the service is ``<prefix>-<run id>``.
        host_port: publish on this host port instead of one the engine picks (host mode: on
            one node, only one task can hold it, so use it with ``replicas=1``).
        networks: networks to attach the tasks to; constraints: placement constraints;
        command: the command to run instead of the image's.
        startup_timeout: seconds allowed for the tasks to run and answer ``/health``.
    """

    def __init__(
        self,
        image: str,
        *,
        replicas: int = 1,
        env: Mapping[str, str] | None = None,
        container_port: int = 8000,
        host: str = "127.0.0.1",
        cpus: float | None = None,
        mem_limit: str | int | None = None,
        labels: Mapping[str, str] | None = None,
        name_prefix: str = "openenv",
        host_port: int | None = None,
        networks: Sequence[str] = (),
        constraints: Sequence[str] = (),
        command: Sequence[str] | None = None,
        startup_timeout: float = 180.0,
    ) -> None:
        super().__init__()
        if replicas < 1:
            raise ProviderError("replicas must be at least 1")
        self.image = image
        self.replicas = replicas
        self.env = dict(env or {})
        self.container_port = container_port
        self.host = host
        self.cpus = cpus
        self.mem_limit = mem_limit
        self.run_id = uuid.uuid4().hex[:12]
        self.labels = {**(labels or {}), LABEL: "swarm", RUN_LABEL: self.run_id}
        self.name = f"{name_prefix}-{self.run_id}"
        self.host_port = host_port
        self.networks = list(networks)
        self.constraints = list(constraints)
        self.command = None if command is None else list(command)
        self.startup_timeout = startup_timeout
        self.service: Any = None
        self._client: Any = None

    def _launch(self) -> list[str]:
        docker = docker_module()
        self._client = client = engine_client()
        if client.info().get("Swarm", {}).get("LocalNodeState") != "active":
            raise ProviderError(f"the Docker engine is not part of a swarm; {SWARM_HINT}")
        ensure_image(client, self.image, pull=False)
        healthcheck = self._fast_healthcheck(client)
        resources = None
        if self.cpus is not None or self.mem_limit is not None:
            mem = self.mem_limit
            if isinstance(mem, str):
                mem = docker.utils.parse_bytes(mem)
            resources = docker.types.Resources(
                cpu_limit=int(self.cpus * 1e9) if self.cpus is not None else None,
                mem_limit=mem,
            )
        port: dict[str, Any] = {
            "Protocol": "tcp",
            "TargetPort": self.container_port,
            "PublishMode": "host",
        }
        if self.host_port is not None:
            port["PublishedPort"] = self.host_port
        endpoint = {"Ports": [port]}
        env = {"HOST": "0.0.0.0", "PORT": str(self.container_port), **self.env}
        try:
            self.service = client.services.create(
                self.image,
                name=self.name,
                env=[f"{k}={v}" for k, v in env.items()],
                labels=self.labels,
                container_labels=self.labels,
                # A raw spec: the SDK's EndpointSpec cannot leave a host-mode port to the engine.
                endpoint_spec=endpoint,
                mode=docker.types.ServiceMode("replicated", replicas=self.replicas),
                resources=resources,
                restart_policy=docker.types.RestartPolicy(condition="none"),
                networks=self.networks or None,
                constraints=self.constraints or None,
                command=self.command,
                healthcheck=healthcheck,
            )
        except docker.errors.APIError as exc:
            raise ProviderError(
                f"the swarm refused the service for {self.image}: {exc.explanation or exc}"
            ) from None
        return self._task_urls(self.replicas)

    def _fast_healthcheck(self, client: Any) -> dict[str, Any] | None:
        """The image's health check with a one-second start interval, on engines that take one
        (the rest inherits from the image); None (the image's own) otherwise."""
        version = tuple(int(part) for part in str(client.api.api_version).split(".")[:2])
        if version < START_INTERVAL_API:
            return None
        config = client.images.get(self.image).attrs.get("Config") or {}
        check = config.get("Healthcheck") or {}
        if not check.get("Test") or check["Test"][0] == "NONE":
            return None
        start_period = check.get("StartPeriod") or int(self.startup_timeout * 1e9)
        return {"StartInterval": START_INTERVAL_NS, "StartPeriod": start_period}

    def _published_port(self, task: dict[str, Any]) -> int | None:
        """The host port of a task: from its status once running, else (a task still
        "starting" while the image's health check has not passed yet) from its container,
        when the container is on this engine."""
        ports = (task["Status"].get("PortStatus") or {}).get("Ports") or []
        published = [p.get("PublishedPort") for p in ports if p.get("PublishedPort")]
        if published:
            return int(published[0])
        container_id = (task["Status"].get("ContainerStatus") or {}).get("ContainerID")
        if not container_id:
            return None
        try:
            network = self._client.api.inspect_container(container_id).get("NetworkSettings") or {}
        except Exception:  # on another node, or gone
            return None
        bindings = (network.get("Ports") or {}).get(f"{self.container_port}/tcp") or []
        ports_found = [b.get("HostPort") for b in bindings if b.get("HostPort")]
        return int(ports_found[0]) if ports_found else None

    def _task_urls(self, count: int) -> list[str]:
        """Wait until ``count`` tasks of the current spec run with a published port; their URLs."""
        deadline = time.monotonic() + self.startup_timeout
        version = None
        while True:
            self.service.reload()
            version = self.service.version
            tasks = self.service.tasks()
            for task in tasks:
                state = task.get("Status", {}).get("State")
                if state in FAILED:
                    raise ProviderError(self._failure(task))
            # "starting": the container runs, its health check has not passed yet (the
            # provider's own /health poll, after this, says when the server answers)
            running = [
                t
                for t in tasks
                if t.get("DesiredState") == "running"
                and t["Status"].get("State") in ("starting", "running")
            ]
            urls = []
            for task in running:
                port = self._published_port(task)
                if port is not None:
                    urls.append(f"http://{self.host}:{port}")
            if len(urls) == count:
                return sorted(urls)
            if time.monotonic() > deadline:
                raise ProviderError(
                    f"service {self.name} has {len(urls)} of {count} tasks running after "
                    f"{self.startup_timeout:g}s (version {version}); see `docker service ps {self.name}`"
                )
            time.sleep(0.3)

    def _failure(self, task: dict[str, Any]) -> str:
        status = task.get("Status", {})
        container_id = (status.get("ContainerStatus") or {}).get("ContainerID")
        logs = ""
        if container_id:
            with contextlib.suppress(Exception):
                logs = self._client.containers.get(container_id).logs(tail=30).decode()
        exit_code = (status.get("ContainerStatus") or {}).get("ExitCode")
        return (
            f"a task of service {self.name} ({self.image}) ended ({status.get('State')}, "
            f"exit code {exit_code}: {status.get('Err') or status.get('Message')}) before "
            f"answering /health; its last lines:\n{last_lines(logs)}"
        )

    def _check_alive(self, index: int) -> str | None:
        for task in self.service.tasks():
            if task["Status"].get("State") in FAILED:
                return self._failure(task)
        return None

    def scale(self, replicas: int) -> list[str]:
        """Change the number of tasks; returns the URLs once the new set answers ``/health``."""
        if replicas < 1:
            raise ProviderError("replicas must be at least 1 (stop() removes the service)")
        with self._lock:
            if self.service is None:
                raise ProviderError("start the provider before scaling it")
            # Only the replica count changes. The spec goes back exactly as stored: the SDK's
            # scale() (and fetch_current_spec) send it with the engine's defaults filled in,
            # which counts as a new spec and replaces every running task.
            self.service.reload()
            spec = self._client.api.inspect_service(self.service.id)["Spec"]
            self._client.api.update_service(
                self.service.id,
                self.service.version,
                task_template=spec["TaskTemplate"],
                name=spec["Name"],
                labels=spec.get("Labels"),
                mode={"Replicated": {"Replicas": replicas}},
                update_config=spec.get("UpdateConfig"),
                rollback_config=spec.get("RollbackConfig"),
                endpoint_spec=spec.get("EndpointSpec"),
            )
            self.replicas = replicas
            self.urls = self._task_urls(replicas)
            self.wait_healthy()
            return list(self.urls)

    def _teardown(self) -> None:
        client = self._client
        if client is None:
            return
        docker = docker_module()
        services = client.services.list(filters={"label": f"{RUN_LABEL}={self.run_id}"})
        if self.service is not None:
            services = [self.service, *[s for s in services if s.id != self.service.id]]
        for service in services:
            with contextlib.suppress(docker.errors.NotFound):
                service.remove()
        # Removing a service stops its containers asynchronously; wait so nothing outlives us.
        deadline = time.monotonic() + 30
        label = {"label": f"{RUN_LABEL}={self.run_id}"}
        while (
            client.containers.list(all=True, filters=label, ignore_removed=True)
            and time.monotonic() < deadline
        ):
            time.sleep(0.2)
        self.service = None
        client.close()
        self._client = None
