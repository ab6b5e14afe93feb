"""WebSocket connections for the load generator: a lean one, and the websockets asyncio client.

Both come from the ``websockets`` library and give the same three operations:
``request(text)`` (send one frame, await the next message), ``finish()`` (send the
protocol's ``close`` message, then the closing handshake) and ``abort()``.

* :class:`LeanConnection` (the default) is the runtime's own connection, which drives
  websockets' sans-I/O ``ClientProtocol`` from a plain ``asyncio.Protocol``: no reader
  task, no message assembler, no send lock. A load generator that costs about as much CPU
  per step as the server would otherwise be what limits the throughput it measures on a
  small machine.
* :class:`AsyncioConnection` wraps ``websockets.asyncio.client.connect``, the client most
  OpenEnv clients use, for comparison (``--client websockets``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from openenv_runtime.client.transport import Connection, ConnectionLost, HandshakeRefused
from openenv_runtime.protocol import CLOSE_FRAME

__all__ = [
    "CLIENTS",
    "AsyncioConnection",
    "ConnectionLost",
    "HandshakeRefused",
    "LeanConnection",
    "open_connection",
]

USER_AGENT = "openenv-bench"
CLIENTS = ("lean", "websockets")


class LeanConnection:
    """The runtime's own sans-I/O connection (:class:`openenv_runtime.client.transport.Connection`)
    with the load generator's operations; never through a proxy from the environment."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    @classmethod
    async def open(
        cls, url: str, *, compression: bool, headers: Mapping[str, str] | None = None
    ) -> LeanConnection:
        """Connect and complete the opening handshake (bound it with a timeout outside).

        ``headers`` go into the handshake request (the access token's ``Authorization``).
        """
        connection = await Connection.open(
            url, headers=headers, max_size=None, use_proxy=False, compression=compression
        )
        return cls(connection)

    async def request(self, text: str) -> str | bytes:
        """Send ``text`` and return the next message."""
        return await self.connection.request(text)

    async def finish(self) -> None:
        """Send the ``close`` message, then close the WebSocket and wait for the server to end TCP."""
        self.connection.send(CLOSE_FRAME)
        await self.connection.close()

    def abort(self) -> None:
        self.connection.abort()


class AsyncioConnection:
    """The same operations on ``websockets.asyncio.client``."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    @classmethod
    async def open(
        cls, url: str, *, compression: bool, headers: Mapping[str, str] | None = None
    ) -> AsyncioConnection:
        ws = await connect(
            url,
            compression="deflate" if compression else None,
            proxy=None,  # traffic goes where --url says, never to a proxy from the environment
            open_timeout=None,  # bounded by the caller
            close_timeout=None,
            ping_interval=None,  # the load generator must not add work of its own
            max_size=None,
            max_queue=None,
            user_agent_header=USER_AGENT,
            additional_headers=dict(headers or {}),
        )
        return cls(ws)

    async def request(self, text: str) -> str | bytes:
        await self.ws.send(text)
        return await self.ws.recv()

    async def finish(self) -> None:
        await self.ws.send(CLOSE_FRAME)
        await self.ws.close()

    def abort(self) -> None:
        if self.ws.transport is not None:
            self.ws.transport.abort()


async def open_connection(
    url: str,
    *,
    client: str = "lean",
    compression: bool = True,
    headers: Mapping[str, str] | None = None,
) -> Any:
    """A connected, handshaken :class:`LeanConnection` or :class:`AsyncioConnection`.

    ``headers`` are added to the handshake request (e.g. ``Authorization: Bearer ...``).
    """
    if client == "lean":
        return await LeanConnection.open(url, compression=compression, headers=headers)
    if client == "websockets":
        return await AsyncioConnection.open(url, compression=compression, headers=headers)
    raise ValueError(f"client must be one of {', '.join(CLIENTS)}, got {client!r}")
