"""The servers Envoy fronts (``--backend``): ``host:port`` values, or files of them, checked.

A host may reach a rendered YAML and a shell, so only what cannot start a new key or command
passes: a host name or an IP address, and a port.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

from openenv_cli.errors import UsageError

_HOST = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252})$")


@dataclass(frozen=True)
class Backend:
    """One server behind Envoy."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def netloc(self) -> str:
        """``host:port`` as a URL (and Prometheus) writes it: an IPv6 address in brackets."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else str(self)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def parse_backend(raw: str) -> Backend:
    """``host:port`` (IPv6 in brackets) → :class:`Backend`; raises :class:`UsageError`."""
    text = raw.strip()
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(
            f"Backend {raw!r} is not host:port.", hint="Write e.g. --backend 10.0.0.5:8000."
        )
    if not (_HOST.match(host) or _is_ip(host)):
        raise UsageError(
            f"Backend host {host!r} is not a host name or an IP address.",
            hint="Use letters, digits, '.', '-' (and ':' inside [IPv6]), e.g. 10.0.0.5:8000.",
        )
    return Backend(host, int(port))


def read_backends(values: list[str]) -> tuple[Backend, ...]:
    """``--backend`` values: ``host:port``, or a file with one ``host:port`` a line (``#`` comments)."""
    found: list[Backend] = []
    for value in values:
        path = Path(value)
        if ":" not in value or path.is_file():
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except OSError as exc:
                raise UsageError(
                    f"--backend {value}: not host:port, and not a readable file ({exc.strerror}).",
                    hint="Pass host:port, or a file with one host:port a line.",
                ) from None
            found.extend(
                parse_backend(line.split("#", 1)[0])
                for line in lines
                if line.split("#", 1)[0].strip()
            )
        else:
            found.append(parse_backend(value))
    return tuple(dict.fromkeys(found))
