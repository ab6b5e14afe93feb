"""``openenv deploy envoy``: Envoy's configuration alone, for servers someone else starts."""

from __future__ import annotations

import ipaddress

from openenv_cli.deploy import monitoring
from openenv_cli.deploy.backends import Backend
from openenv_cli.deploy.render import Discovery, envoy_files
from openenv_cli.deploy.settings import DeploySettings


def discovery_for(backends: tuple[Backend, ...]) -> Discovery:
    """STATIC when every backend is an IP address; STRICT_DNS (re-resolved) when any is a name."""
    try:
        for backend in backends:
            ipaddress.ip_address(backend.host)
    except ValueError:
        return "STRICT_DNS"
    return "STATIC"


def render(settings: DeploySettings) -> dict[str, str]:
    """``envoy.yaml`` balancing ``settings.backends``, and ``monitoring/`` scraping them."""
    return envoy_files(
        settings,
        discovery=discovery_for(settings.backends),
        backends=settings.backends,
        path="envoy.yaml",
    ) | monitoring.render(settings, backends=settings.backends, envoy=False)
