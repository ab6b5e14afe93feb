"""``openenv deploy kubernetes``: a Kustomize folder (replicas, Services, autoscaler,
disruption budget and an Envoy entry point). Applying it is ``kubectl apply -k DIR``."""

from __future__ import annotations

from openenv_cli.deploy import monitoring
from openenv_cli.deploy.backends import Backend
from openenv_cli.deploy.render import envoy_files, render_target
from openenv_cli.deploy.settings import DeploySettings

ENVOY_ADMIN_PORT = 9901


def nofile_needed(settings: DeploySettings) -> int:
    """Open files one replica needs: a socket per session plus headroom for the process."""
    return settings.capacity_per_replica + 1024


def render(settings: DeploySettings) -> dict[str, str]:
    """The Kustomize folder's files, ``{relative path: text}``."""
    files = render_target(
        settings,
        {
            "namespace": settings.namespace or "",
            "cpu": settings.cpu,
            "memory": settings.memory,
            "max_replicas": settings.max_replicas,
            "nofile": nofile_needed(settings),
            "envoy_memory": f"{128 + (2 * settings.sessions_per_front * 16 + 1023) // 1024}Mi",
        },
    )
    # Envoy resolves the headless Service: one address per ready replica, re-read every 5 s.
    files |= envoy_files(
        settings,
        discovery="STRICT_DNS",
        backends=(Backend(f"{settings.name}-headless", settings.port),),
        admin_port=ENVOY_ADMIN_PORT,
        stats=True,
    )
    files |= monitoring.render(settings, envoy=True)
    return files
