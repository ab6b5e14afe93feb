"""Where the study sends its load for a port Docker publishes (see :mod:`.study_deploy`).

A Docker engine started with its userland proxy (the default) runs one ``docker-proxy``
process per published port, and connections to ``127.0.0.1:PORT`` go through it. That proxy
holds six open files per connection (the client's socket, the container's, and a splice pipe
of two ends for each direction) and, when ``accept`` fails for want of open files, it stops:
every connection it carries is dropped and the port answers no more. Under a limit of 20,000
open files that happens near 3,300 concurrent connections, whatever the server holds.

Connections to a non-loopback address of this machine take the engine's NAT rules in the
kernel instead (as every connection does when the engine runs with ``--userland-proxy=false``),
which hold no open file per connection. So the study publishes a container's port on the host's
address on Docker's bridge (its gateway) and sends the load there, when that address is one of
this machine's (not on an engine inside a VM), and says so in the report.
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
PROXY_FILES_PER_CONNECTION = 6
"""Open files ``docker-proxy`` holds per connection (two sockets, two splice pipes)."""
PROXY_FILES_RESERVED = 16
"""Open files ``docker-proxy`` holds with no connection (listener, epoll, stdio, ...)."""


def is_local_address(address: str) -> bool:
    """True when ``address`` is assigned to this machine (a socket can bind to it)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except OSError:
        return False
    return True


def bridge_gateway(client: Any, network: str) -> str | None:
    """The host's address on the Docker network ``network`` (its gateway) when that address
    is one of this machine's; else None (no such network, or the engine runs in a VM)."""
    import docker.errors

    try:
        attrs = client.networks.get(network).attrs
    except (docker.errors.DockerException, OSError):
        return None
    for config in (attrs.get("IPAM") or {}).get("Config") or []:
        gateway = str(config.get("Gateway") or "").split("/")[0] or _first_host(config)
        if gateway and ":" not in gateway and is_local_address(gateway):
            return gateway
    return None


def _first_host(config: dict[str, Any]) -> str:
    """The address dockerd gives the host on a subnet whose gateway it does not list (some
    engines leave ``Gateway`` out of the default bridge's IPAM): the subnet's first host."""
    try:
        subnet = ipaddress.ip_network(str(config.get("Subnet") or ""), strict=False)
    except ValueError:
        return ""
    return str(subnet.network_address + 1) if subnet.num_addresses > 2 else ""


def userland_proxy_limit(port: int, proc: Path = Path("/proc")) -> int | None:
    """The open-files limit (soft) of the ``docker-proxy`` serving host port ``port`` here, or
    None when no such process is visible (the engine runs without its userland proxy, or
    elsewhere)."""
    wanted = f"-host-port\0{port}\0".encode()
    for entry in proc.glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if not cmdline.split(b"\0", 1)[0].endswith(b"docker-proxy") or wanted not in cmdline:
                continue
            for line in (entry / "limits").read_text().splitlines():
                if line.startswith("Max open files"):
                    soft = line.split()[3]
                    return None if soft == "unlimited" else int(soft)
        except (OSError, ValueError, IndexError):
            continue
    return None


def proxy_capacity(limit: int) -> int:
    """Concurrent connections ``docker-proxy`` carries within ``limit`` open files."""
    return max(0, (limit - PROXY_FILES_RESERVED) // PROXY_FILES_PER_CONNECTION)


def reach_note(address: str, port: int, proxy_limit: int | None) -> str:
    """The report's note on how the load reached a published port."""
    if address == LOOPBACK:
        if proxy_limit is None:
            return f"reached at {LOOPBACK}:{port}"
        return (
            f"reached at {LOOPBACK}:{port} through the engine's userland proxy, which holds "
            f"{proxy_limit:,} open files: about {proxy_capacity(proxy_limit):,} sessions at once"
        )
    via = (
        f"not the engine's userland proxy ({proxy_limit:,} open files: about "
        f"{proxy_capacity(proxy_limit):,} sessions at once through {LOOPBACK})"
        if proxy_limit is not None
        else "the engine runs no userland proxy for it"
    )
    return (
        f"reached at {address}:{port}, the host's address on Docker's bridge: "
        f"the kernel's NAT carries the connections, {via}"
    )
