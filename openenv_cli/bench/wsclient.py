"""WebSocket connections for the load generator: a lean one, and the websockets asyncio client.

Both come from the ``websockets`` library and give the same three operations:
``request(text)`` (send one frame, await the next message), ``finish()`` (send the
protocol's ``close`` message, then the closing handshake) and ``abort()``.

* :class:`LeanConnection` (the default) drives websockets' sans-I/O ``ClientProtocol``
  from a plain ``asyncio.Protocol``: no reader task, no message assembler, no send lock.
  A load generator that costs about as much CPU per step as the server would otherwise
  be what limits the throughput it measures on a small machine.
* :class:`AsyncioConnection` wraps ``websockets.asyncio.client.connect``, the client most
  OpenEnv clients use, for comparison (``--client websockets``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.client import ClientProtocol
from websockets.extensions.permessage_deflate import enable_client_permessage_deflate
from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.uri import parse_uri

CLOSE_FRAME = '{"type":"close"}'
USER_AGENT = "openenv-bench"
CLIENTS = ("lean", "websockets")


class ConnectionLost(ConnectionError):
    """The connection ended while a reply was awaited; ``code``: the server's close code, if it sent one."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class LeanConnection(asyncio.Protocol):
    """One WebSocket connection driven by websockets' sans-I/O protocol."""

    def __init__(
        self,
        protocol: ClientProtocol,
        loop: asyncio.AbstractEventLoop,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.protocol = protocol
        self.loop = loop
        self.headers = headers or {}
        self.transport: asyncio.Transport | None = None
        self.opened: asyncio.Future[None] = loop.create_future()
        self.lost: asyncio.Future[None] = loop.create_future()
        self.waiter: asyncio.Future[str | bytes] | None = None
        self.pending: deque[str | bytes] = deque()
        self.fragments: list[bytes] = []
        self.fragment_text = False

    @classmethod
    async def open(
        cls, url: str, *, compression: bool, headers: Mapping[str, str] | None = None
    ) -> LeanConnection:
        """Connect and complete the opening handshake (bound it with a timeout outside).

        ``headers`` go into the handshake request (the access token's ``Authorization``).
        """
        loop = asyncio.get_running_loop()
        uri = parse_uri(url)
        protocol = ClientProtocol(
            uri,
            extensions=enable_client_permessage_deflate(None) if compression else None,
            max_size=None,
        )
        _, connection = await loop.create_connection(
            lambda: cls(protocol, loop, headers), uri.host, uri.port
        )
        try:
            await connection.opened
        except BaseException:
            connection.abort()
            raise
        return connection

    # -- asyncio.Protocol --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        request = self.protocol.connect()
        request.headers["User-Agent"] = USER_AGENT
        for name, value in self.headers.items():
            request.headers[name] = value
        self.protocol.send_request(request)
        self._flush()

    def data_received(self, data: bytes) -> None:
        self.protocol.receive_data(data)
        self._process()

    def eof_received(self) -> bool | None:
        self.protocol.receive_eof()
        self._process()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        received = self.protocol.close_rcvd
        code = received.code if received is not None else None
        error = ConnectionLost(f"connection lost ({code or 'no close frame'})", code)
        if not self.opened.done():
            self.opened.set_exception(self.protocol.handshake_exc or error)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(error)
        if not self.lost.done():
            self.lost.set_result(None)

    # -- protocol events --

    def _process(self) -> None:
        for event in self.protocol.events_received():
            if not isinstance(event, Frame):  # the handshake's Response
                if self.opened.done():
                    continue
                if self.protocol.handshake_exc is not None:
                    self.opened.set_exception(self.protocol.handshake_exc)
                else:
                    self.opened.set_result(None)
                continue
            opcode = event.opcode
            if opcode is Opcode.TEXT or opcode is Opcode.BINARY:
                if event.fin:
                    self._deliver(
                        bytes(event.data).decode() if opcode is Opcode.TEXT else bytes(event.data)
                    )
                else:
                    self.fragments = [bytes(event.data)]
                    self.fragment_text = opcode is Opcode.TEXT
            elif opcode is Opcode.CONT:
                self.fragments.append(bytes(event.data))
                if event.fin:
                    data = b"".join(self.fragments)
                    self.fragments = []
                    self._deliver(data.decode() if self.fragment_text else data)
            # PING is answered and CLOSE acknowledged by the protocol itself (see _flush).
        self._flush()

    def _deliver(self, message: str | bytes) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            self.waiter = None
            waiter.set_result(message)
        else:
            self.pending.append(message)

    def _flush(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        for data in self.protocol.data_to_send():
            if data:
                transport.write(data)
            elif transport.can_write_eof():
                transport.write_eof()

    # -- the operations the load generator uses --

    async def request(self, text: str) -> str | bytes:
        """Send ``text`` and return the next message."""
        if self.protocol.state is not State.OPEN:
            received = self.protocol.close_rcvd
            code = received.code if received is not None else None
            raise ConnectionLost(f"connection closed ({code})", code)
        self.protocol.send_text(text.encode())
        self._flush()
        if self.pending:
            return self.pending.popleft()
        self.waiter = self.loop.create_future()
        return await self.waiter

    async def finish(self) -> None:
        """Send the ``close`` message, then close the WebSocket and wait for the server to end TCP."""
        if self.protocol.state is State.OPEN:
            self.protocol.send_text(CLOSE_FRAME.encode())
            self._flush()
        if self.protocol.state is State.OPEN:
            self.protocol.send_close(1000)
            self._flush()
        await asyncio.shield(self.lost)

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


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
