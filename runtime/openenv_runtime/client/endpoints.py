"""``endpoints.json``: where a deployment's servers answer, as ``openenv deploy`` writes it in
its ``--out`` folder and ``EnvPool.from_deploy`` reads it.

::

    {"version": 1, "target": "slurm", "front": "http://10.0.0.4:8080",
     "replicas": ["http://10.0.0.4:8000", "http://10.0.0.5:8000"]}

``front`` is the Envoy entry point (or null), ``replicas`` the servers themselves, listed only
where the machine that deployed them could reach each one. The file is read strictly: at most
:data:`MAX_BYTES`, URLs only ``http``/``https``/``ws``/``wss`` with a host and nothing but a
path after it (no credentials, query or fragment).
"""

from __future__ import annotations

import json
import os
import stat
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENDPOINTS_FILE = "endpoints.json"
VERSION = 1
MAX_BYTES = 1 << 20
MAX_REPLICAS = 10_000
SCHEMES = ("http", "https", "ws", "wss")


class EndpointsError(ValueError):
    """An ``endpoints.json`` that is missing, too large or not what ``openenv deploy`` writes."""


@dataclass(frozen=True)
class Endpoints:
    """A deployment's entry point and servers."""

    target: str
    front: str | None = None
    replicas: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        """The file's text."""
        data = {
            "version": VERSION,
            "target": self.target,
            "front": self.front,
            "replicas": list(self.replicas),
        }
        return json.dumps(data, indent=1) + "\n"


def check_url(url: object, where: str) -> str:
    """``url`` when it is an http(s)/ws(s) URL with a host and no credentials, query or fragment."""
    if not isinstance(url, str) or not url or len(url) > 2048:
        raise EndpointsError(f"{where}: {url!r} is not a URL.")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises on a port that is not a number in range
    except ValueError as exc:
        raise EndpointsError(f"{where}: {url!r} is not a URL ({exc}).") from None
    if parts.scheme not in SCHEMES:
        raise EndpointsError(
            f"{where}: {url!r} is not an {'/'.join(SCHEMES)} URL (scheme {parts.scheme!r})."
        )
    if not parts.hostname or parts.username is not None or parts.password is not None:
        raise EndpointsError(f"{where}: {url!r} needs a host and no user or password.")
    if parts.query or parts.fragment or any(c.isspace() or ord(c) < 32 for c in url):
        raise EndpointsError(f"{where}: {url!r} may hold only a scheme, host, port and path.")
    del port
    return url


def read_endpoints(directory: str | os.PathLike[str]) -> Endpoints:
    """The ``endpoints.json`` in ``directory`` (an ``openenv deploy --out`` folder), checked."""
    path = Path(directory) / ENDPOINTS_FILE
    text = _read_bounded(path)
    try:
        data: Any = json.loads(text)
    except ValueError as exc:
        raise EndpointsError(f"{path} is not JSON ({exc}).") from None
    if not isinstance(data, dict):
        raise EndpointsError(f"{path} does not hold a JSON object.")
    unknown = set(data) - {"version", "target", "front", "replicas"}
    if data.get("version") != VERSION or unknown:
        raise EndpointsError(
            f"{path} is not an endpoints file of version {VERSION}"
            + (f" (unknown keys: {', '.join(sorted(unknown))})" if unknown else "")
            + "; write it again with `openenv deploy`."
        )
    target, front, replicas = data.get("target"), data.get("front"), data.get("replicas", [])
    if not isinstance(target, str) or not target.isidentifier():
        raise EndpointsError(f"{path}: target {target!r} is not a deploy target's name.")
    if not isinstance(replicas, list) or len(replicas) > MAX_REPLICAS:
        raise EndpointsError(f"{path}: replicas must be a list of at most {MAX_REPLICAS} URLs.")
    return Endpoints(
        target=target,
        front=None if front is None else check_url(front, f"{path}: front"),
        replicas=[check_url(url, f"{path}: replicas[{i}]") for i, url in enumerate(replicas)],
    )


def _read_bounded(path: Path) -> str:
    # No link followed; a FIFO planted there must not block the open.
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise EndpointsError(
            f"{path} does not exist: `openenv deploy TARGET --out {path.parent}` writes it."
        ) from None
    except OSError as exc:
        raise EndpointsError(
            f"{path} cannot be read ({exc.strerror}; a link is refused)."
        ) from None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise EndpointsError(f"{path} is not a regular file.")
        raw = file.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise EndpointsError(f"{path} is larger than {MAX_BYTES} bytes.")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise EndpointsError(f"{path} is not UTF-8 text.") from None
