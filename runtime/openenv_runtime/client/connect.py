"""Opening a client's connection: the server's WebSocket URL, the default token, the handshake.

:func:`open_connection` is the transport without session logic: one handshake, its failures
said as ``EnvError`` codes a caller can act on (``CAPACITY_REACHED``, ``CONNECTION_ERROR``).
"""

from __future__ import annotations

import asyncio
import os
from urllib.parse import urlsplit, urlunsplit

from websockets.exceptions import InvalidURI

from ..errors import EnvError
from .transport import Connection, ConnectionLost, HandshakeRefused

DEFAULT_MAX_MESSAGE_BYTES = 64 << 20


def ws_url(base_url: str) -> str:
    """``http://h:8000`` → ``ws://h:8000/ws``; ``https`` → ``wss``; an explicit ``/ws`` is kept."""
    parts = urlsplit(base_url.strip())
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme.lower())
    if scheme is None or not parts.netloc:
        raise EnvError(
            "CONNECTION_ERROR", f"{base_url!r} is not a server URL; use e.g. http://127.0.0.1:8000"
        )
    path = parts.path.rstrip("/")
    if not path.endswith("/ws"):
        path += "/ws"
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


def default_token(url: str) -> str | None:
    """The token a client sends when given none: ``HF_TOKEN`` for ``*.hf.space`` servers."""
    host = urlsplit(url).hostname or ""
    if host.endswith(".hf.space"):
        return os.environ.get("HF_TOKEN") or None
    return None


async def open_connection(
    url: str,
    *,
    headers: dict[str, str],
    max_size: int,
    ping_interval: float | None,
    ping_timeout: float | None,
    connect_timeout: float,
) -> Connection:
    """One connection to the WebSocket ``url``, handshake done.

    Failures are ``EnvError("CONNECTION_ERROR")``; ``details`` has the HTTP ``status`` and
    the server's ``X-OpenEnv-Error`` header when the handshake was refused, and
    ``dropped: True`` when the connection broke during it. A server at capacity answers
    ``EnvError("CAPACITY_REACHED")``, the same code as the message after the upgrade.
    """
    try:
        return await asyncio.wait_for(
            Connection.open(
                url,
                headers=headers,
                max_size=max_size,
                ping_interval=ping_interval,
                ping_timeout=ping_timeout,
            ),
            connect_timeout,
        )
    except HandshakeRefused as exc:
        refused = exc.headers.get("x-openenv-error")
        if refused == "CAPACITY_REACHED":  # full: the same code as after the upgrade
            raise EnvError(
                "CAPACITY_REACHED",
                f"{url} is at capacity (HTTP {exc.status}); retry later or elsewhere",
                {"status": exc.status, "retry_after": exc.headers.get("retry-after")},
            ) from None
        hint = " (missing or wrong token: pass token=...)" if exc.status in (401, 403) else ""
        raise EnvError(
            "CONNECTION_ERROR",
            f"{url} refused the WebSocket with HTTP {exc.status}{hint}",
            {"status": exc.status, "error": exc.headers.get("x-openenv-error")},
        ) from None
    except ConnectionLost as exc:
        raise EnvError(
            "CONNECTION_ERROR",
            f"the handshake with {url} failed: {exc}",
            {"dropped": True},
        ) from None
    except (OSError, TimeoutError, asyncio.TimeoutError, ValueError, InvalidURI) as exc:
        reason = str(exc) or type(exc).__name__
        raise EnvError("CONNECTION_ERROR", f"cannot connect to {url}: {reason}") from None
    except Exception as exc:  # an invalid handshake reply (websockets' InvalidHandshake)
        raise EnvError(
            "CONNECTION_ERROR",
            f"the handshake with {url} failed: {type(exc).__name__}: {exc}",
            {"dropped": True},
        ) from None
