"""Where the benchmark's load goes and what each step sends: :class:`Target` and its frames.

Built from ``--url``: only that host and port get traffic.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .wsclient import CLIENTS

RESET_FRAME = '{"type":"reset","data":{}}'


@dataclass(frozen=True, slots=True)
class Target:
    """Where the load goes and how: built from ``--url`` (only that host and port get traffic)."""

    host: str
    port: int
    base_path: str = ""
    transport: str = "ws"
    timeout: float = 30.0
    compression: bool = True
    client: str = "lean"
    action: str = "{}"
    """The action every step sends, as JSON object text."""
    wait_field: bool = True
    """Put each run's wait into the action as ``wait`` (the built-in environment's field)."""
    token: str | None = field(default=None, repr=False)
    """The access token every handshake and request carries (see ``bench.auth``); never shown."""

    @classmethod
    def parse(
        cls,
        url: str,
        *,
        transport: str = "ws",
        timeout: float = 30.0,
        compression: bool = True,
        client: str = "lean",
        action: Mapping[str, Any] | None = None,
        wait_field: bool = True,
        token: str | None = None,
    ) -> Target:
        """``http://host:port[/prefix]`` or ``ws://host:port[/prefix][/ws]``; raises ``ValueError``."""
        parts = urlsplit(url.strip())
        if parts.username is not None or parts.password is not None or parts.query:
            raise ValueError(  # not echoed: it may hold a secret
                "--url must be a plain base URL, without user:password@ or a ?query "
                "(the access token comes from OPENENV_API_KEY and travels in a header)."
            )
        if parts.scheme not in ("http", "ws"):
            raise ValueError(
                f"--url must start with http:// or ws:// (got {url!r}); TLS is not supported by the load generator."
            )
        if not parts.hostname:
            raise ValueError(f"--url has no host: {url!r}")
        if transport not in ("ws", "http"):
            raise ValueError(f"transport must be ws or http, got {transport!r}")
        if timeout <= 0:
            raise ValueError("the timeout must be positive")
        if client not in CLIENTS:
            raise ValueError(f"client must be one of {', '.join(CLIENTS)}, got {client!r}")
        path = parts.path.rstrip("/")
        path = path.removesuffix("/ws")
        return cls(
            parts.hostname,
            parts.port or 80,
            path,
            transport,
            float(timeout),
            compression,
            client,
            _compact(dict(action or {})),
            wait_field,
            token or None,
        )

    @property
    def ws_url(self) -> str:
        return f"ws://{self._netloc}{self.base_path}/ws"

    @property
    def http_url(self) -> str:
        return f"http://{self._netloc}{self.base_path}"

    @property
    def _netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def action_text(target: Target, wait: float) -> str:
    """The JSON text of the action one step sends (with ``wait`` when the target takes it)."""
    if not target.wait_field:
        return target.action
    return _compact({**json.loads(target.action), "wait": float(wait)})


def step_frame(target: Target, wait: float) -> str:
    """The WebSocket ``step`` message."""
    return f'{{"type":"step","data":{action_text(target, wait)}}}'
