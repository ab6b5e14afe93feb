"""The settings of ``openenv deploy``, resolved once: flag, then environment variable, then
``openenv.yaml`` (its ``server:`` section and the ``deploy:`` section), then the default.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from openenv_cli.config import parse_bool, parse_float, resolve
from openenv_cli.errors import UsageError
from openenv_cli.manifest import load_manifest
from openenv_cli.manifest_schema import DeployConfig, Manifest

# The servers behind Envoy and the sizing rules are part of this module's face.
from .backends import Backend, read_backends
from .sizing import (
    FDS_PER_SESSION,
    FRONT_FD_RESERVE,
    default_memory,
    fronts_needed,
    local_nofile_limit,
)

Target = Literal["kubernetes", "swarm", "slurm", "envoy"]
Balancing = Literal["least_request", "session"]
BALANCINGS: tuple[Balancing, ...] = ("least_request", "session")
TARGETS: tuple[Target, ...] = ("kubernetes", "swarm", "slurm", "envoy")

DEFAULT_REPLICAS = 2
DEFAULT_FRONT_PORT = 8080
DEFAULT_ENVOY_IMAGE = "envoyproxy/envoy:v1.40.0"
ENVOY_VERSION = "1.40.0"
LOCAL_ENVOY_IMAGE = f"openenv-envoy:{ENVOY_VERSION}"  # built by `deploy swarm --apply`


@dataclass(frozen=True)
class DeploySettings:
    """Everything the renderers need, resolved."""

    target: Target
    project_dir: Path | None
    name: str
    image: str
    envoy_image: str
    port: int  # the port each replica listens on
    front_port: int
    replicas: int
    workers: int
    sessions_per_worker: int
    session_timeout: float  # 0: never
    drain_timeout: float
    token: bool
    access_log: bool
    balancing: Balancing
    max_replicas: int
    namespace: str | None
    cpu: str
    memory: str
    backends: tuple[Backend, ...] = ()
    checkpoints: bool = False  # a shared checkpoint volume (CHECKPOINT_DIR) on every replica
    fronts: int = 1  # Envoy fronts sharing the sessions (processes on one port, or pods)
    front_nofile: int = 65_536  # open files one front may hold

    @property
    def capacity_per_replica(self) -> int:
        return self.workers * self.sessions_per_worker

    @property
    def capacity(self) -> int:
        return self.capacity_per_replica * max(self.replicas, len(self.backends), 1)

    @property
    def sessions_per_front(self) -> int:
        """The sessions each front carries when the capacity is spread evenly over the fronts."""
        return math.ceil(self.capacity / self.fronts)


# What may reach the rendered YAML and shell: nothing that could start a new key or command.
_DNS_LABEL = re.compile(r"^[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?$")
_CPU = re.compile(r"^[0-9]+(?:\.[0-9]+)?m?$")
_MEMORY = re.compile(r"^[0-9]+(?:\.[0-9]+)?(?:Ki|Mi|Gi|Ti|K|M|G|T)?$")


def check_settings(settings: DeploySettings) -> DeploySettings:
    """Refuse values that are not what they claim to be before they reach a template."""
    from openenv_cli.image.plan import is_valid_reference

    if not _DNS_LABEL.match(settings.name):
        raise UsageError(
            f"The name {settings.name!r} (from openenv.yaml `name`) cannot name Kubernetes, Swarm "
            "or Slurm objects.",
            hint="Use lowercase letters, digits and '_' or '-', at most 40, starting with a letter.",
        )
    if settings.namespace is not None and not _DNS_LABEL.match(settings.namespace):
        raise UsageError(
            f"deploy.namespace {settings.namespace!r} is not a Kubernetes namespace name.",
            hint="Use lowercase letters, digits and '-', starting with a letter.",
        )
    for what, image in (("image", settings.image), ("envoy image", settings.envoy_image)):
        if image and not is_valid_reference(image):
            raise UsageError(
                f"The {what} {image!r} is not a valid image reference.",
                hint="Write e.g. registry.example.com/team/my_env:0.1.0.",
            )
    if not _CPU.match(settings.cpu):
        raise UsageError(
            f"deploy.cpu {settings.cpu!r} is not a CPU quantity.", hint="e.g. 500m or 2."
        )
    if not _MEMORY.match(settings.memory):
        raise UsageError(
            f"deploy.memory {settings.memory!r} is not a memory quantity.",
            hint="e.g. 512Mi or 2Gi.",
        )
    return settings


def runtime_default(name: str) -> float:
    """The runtime's own default for server setting ``name`` (written once, there)."""
    from openenv_runtime.server.config.fields import ServerSettings

    value = ServerSettings.model_fields[name].default
    return float(value) if value is not None else 0.0


def resolve_settings(
    target: Target,
    project_dir: Path | None,
    *,
    replicas: int | None = None,
    image: str | None = None,
    front_port: int | None = None,
    token: bool | None = None,
    backends: list[str] | None = None,
    balancing: str | None = None,
    fronts: int | None = None,
    front_nofile: int | None = None,
    environ: Mapping[str, str] | None = None,
    manifest: Manifest | None = None,
) -> DeploySettings:
    """Resolve the settings of ``openenv deploy TARGET`` for the project in ``project_dir``.

    ``project_dir`` may be None only for the envoy target (a bare Envoy config needs no project).
    ``manifest``: the project's ``openenv.yaml`` when the caller has read it already.
    """
    environ = os.environ if environ is None else environ
    if project_dir is not None:
        manifest = manifest if manifest is not None else load_manifest(project_dir)
    elif target != "envoy":
        raise UsageError(
            f"`openenv deploy {target}` needs a project (no openenv.yaml found).",
            hint="Run it in the project folder, or pass the folder: openenv deploy TARGET PATH.",
        )
    deploy = manifest.deploy if manifest is not None else DeployConfig.model_validate({})
    parsed_backends = read_backends(backends or [])
    if target == "envoy" and not parsed_backends:
        raise UsageError(
            "The envoy target needs the servers to balance.",
            hint="Pass --backend host:port (repeatable) or --backend FILE (one host:port a line).",
        )

    def number(key: str, flag: float | None, env: str | None, where: str, default: float) -> float:
        value = resolve(
            key,
            flag=flag,
            env=env,
            manifest=manifest,
            manifest_key=where,
            default=default,
            parse=parse_float,
            environ=environ,
        ).value
        parsed = float(value if value is not None else default)
        if not math.isfinite(parsed):
            raise UsageError(
                f"{key} is {parsed}: it must be a finite number.",
                hint=f"Check {env or key} and {where} in openenv.yaml.",
            )
        return parsed

    workers = int(number("workers", None, "WORKERS", "server.workers", runtime_default("workers")))
    sessions = int(
        number(
            "max_concurrent_envs",
            None,
            "MAX_CONCURRENT_ENVS",
            "server.max_concurrent_envs",
            runtime_default("max_concurrent_envs"),
        )
    )
    count = int(
        number("replicas", replicas, "OPENENV_DEPLOY_REPLICAS", "deploy.replicas", DEFAULT_REPLICAS)
    )
    if count < 1 or workers < 1 or sessions < 1:
        raise UsageError(
            "Replicas, workers and sessions per worker must each be at least 1.",
            hint="Check --replicas, WORKERS (server.workers) and MAX_CONCURRENT_ENVS.",
        )
    nofile = int(
        number(
            "front_nofile",
            front_nofile,
            "OPENENV_DEPLOY_FRONT_NOFILE",
            "deploy.front_nofile",
            local_nofile_limit(),
        )
    )
    if nofile < FRONT_FD_RESERVE + FDS_PER_SESSION:
        raise UsageError(
            f"A front with {nofile} open files holds no session (it keeps {FRONT_FD_RESERVE}).",
            hint="Raise --front-nofile (OPENENV_DEPLOY_FRONT_NOFILE, deploy.front_nofile).",
        )
    capacity = workers * sessions * (len(parsed_backends) or count)
    front_count = int(
        number(
            "fronts",
            fronts,
            "OPENENV_DEPLOY_FRONTS",
            "deploy.fronts",
            fronts_needed(capacity, nofile),
        )
    )
    if front_count < 1:
        raise UsageError("--fronts must be at least 1.", hint="Omit it to size the fronts.")
    envoy_default = DEFAULT_ENVOY_IMAGE if target == "kubernetes" else LOCAL_ENVOY_IMAGE
    envoy_image = resolve(
        "envoy_image",
        env="OPENENV_ENVOY_IMAGE",
        manifest=manifest,
        manifest_key="deploy.envoy_image",
        default=envoy_default,
        environ=environ,
    ).value
    wants_token = resolve(
        "token",
        flag=token,
        env="OPENENV_DEPLOY_TOKEN",
        manifest=manifest,
        manifest_key="deploy.token",
        default=bool(environ.get("OPENENV_API_KEY")),
        parse=parse_bool,
        environ=environ,
    ).value
    chosen = resolve(
        "balancing",
        flag=balancing,
        env="OPENENV_DEPLOY_BALANCING",
        manifest=manifest,
        manifest_key="deploy.balancing",
        default="least_request",
        environ=environ,
    )
    if chosen.value not in BALANCINGS:
        raise UsageError(
            f"Balancing {chosen.value!r} ({chosen.origin}) is not one of {', '.join(BALANCINGS)}.",
            hint="least_request: fewest open sessions; session: resumed sessions reach their replica.",
        )
    settings = DeploySettings(
        target=target,
        project_dir=project_dir.resolve() if project_dir is not None else None,
        name=(manifest.name if manifest is not None else "openenv").replace("_", "-"),
        image=_image(image, manifest, project_dir, environ),
        envoy_image=str(envoy_image),
        port=int(number("port", None, "PORT", "port", runtime_default("port"))),
        front_port=int(
            number(
                "front_port", front_port, "OPENENV_DEPLOY_PORT", "deploy.port", DEFAULT_FRONT_PORT
            )
        ),
        replicas=len(parsed_backends) or count,
        workers=workers,
        sessions_per_worker=sessions,
        session_timeout=max(
            number(
                "session_timeout",
                None,
                "SESSION_TIMEOUT",
                "server.session_timeout",
                runtime_default("session_timeout"),
            ),
            0.0,
        ),
        drain_timeout=number(
            "drain_timeout",
            None,
            "DRAIN_TIMEOUT",
            "server.drain_timeout",
            runtime_default("drain_timeout"),
        ),
        token=bool(wants_token),
        access_log=deploy.access_log,
        balancing=chosen.value,
        max_replicas=max(deploy.max_replicas or 4 * count, count),
        namespace=deploy.namespace,
        cpu=deploy.cpu or "500m",
        memory=deploy.memory or default_memory(workers * sessions),
        backends=parsed_backends,
        checkpoints=deploy.checkpoints,
        fronts=front_count,
        front_nofile=nofile,
    )
    return check_settings(settings)


def _image(
    flag: str | None,
    manifest: Manifest | None,
    project_dir: Path | None,
    environ: Mapping[str, str],
) -> str:
    """--image, else $OPENENV_IMAGE_TAG, else deploy.image, else what `openenv build` tags."""
    if flag and flag.strip():
        return flag.strip()
    if manifest is None or project_dir is None:
        return ""
    from openenv_cli.image.plan import project_version, resolve_tags

    if manifest.deploy.image and not (environ.get("OPENENV_IMAGE_TAG") or "").strip():
        return manifest.deploy.image.strip()
    tags, _ = resolve_tags((), manifest, project_version(project_dir, manifest), environ)
    return tags[0]
