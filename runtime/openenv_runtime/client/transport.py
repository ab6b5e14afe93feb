"""The client's one WebSocket connection: websockets' sans-I/O protocol on an ``asyncio.Protocol``.

This is the only place where a connection is opened and frames are sent and received, so
reconnecting (or anything else that wraps a connection) has one thing to wrap.

Why not ``websockets.asyncio.client``: in a trainer the client runs in the same process as
everything else and its CPU per step is paid for every session of every batch. That client
runs a reader task, a message assembler and a send lock per connection; driving the same
library's sans-I/O ``ClientProtocol`` from ``data_received`` does the same work in roughly
half the CPU (``benchmarks/client/client_cost.py`` measures it).

Replies come back in the order requests were sent (the protocol answers every request
exactly once, in order), so :meth:`Connection.submit` may be called again before the
previous reply has arrived: each call gets the future of its own reply.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import sys
from collections import deque
from collections.abc import Callable, Mapping
from typing import Protocol

from websockets.client import ClientProtocol
from websockets.exceptions import InvalidStatus
from websockets.extensions.permessage_deflate import enable_client_permessage_deflate
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.uri import WebSocketURI, parse_uri

from ..redaction import CLIENT_LOGGERS, install_redaction

USER_AGENT = "openenv-runtime"
# Where urllib (and so websockets) finds proxies in the environment alone; macOS and Windows
# also read the system's settings.
_ENVIRONMENT_PROXIES_ONLY = sys.platform not in ("darwin", "win32")


def _proxy_for(uri: WebSocketURI) -> str | None:
    """The proxy the environment configures for ``uri`` (websockets ≥ 15 reads it), or None."""
    if _ENVIRONMENT_PROXIES_ONLY and not any(k[-6:].lower() == "_proxy" for k in os.environ):
        # No *_proxy variable: no proxy, known at a tenth of what websockets' lookup costs
        # (it decodes the whole environment twice; fork(n=32) opens 32 connections)
        return None
    try:
        from websockets.proxy import get_proxy  # websockets >= 16
    except ImportError:
        try:
            from websockets.uri import get_proxy  # type: ignore[attr-defined,no-redef]  # 15
        except ImportError:  # websockets < 15 had no proxy support, nor did its client
            return None
    proxy: str | None = get_proxy(uri)
    return proxy


async def _through_proxy(
    factory: Callable[[], Connection],
    uri: WebSocketURI,
    proxy: str,
    context: ssl.SSLContext | None,
) -> Connection:
    """Open the connection through an HTTP(S) or SOCKS proxy, with websockets' own helpers."""
    from websockets.asyncio.client import connect_http_proxy, connect_socks_proxy

    try:
        from websockets.proxy import parse_proxy  # websockets >= 16
    except ImportError:
        from websockets.uri import parse_proxy  # type: ignore[attr-defined,no-redef]  # 15

    loop = asyncio.get_running_loop()
    parsed = parse_proxy(proxy)
    if parsed.scheme.startswith("socks"):
        sock = await connect_socks_proxy(parsed, uri)
        _, connection = await loop.create_connection(
            factory, sock=sock, ssl=context, server_hostname=uri.host if context else None
        )
        return connection
    proxy_tls = ssl.create_default_context() if parsed.scheme == "https" else None
    transport = await connect_http_proxy(parsed, uri, user_agent_header=USER_AGENT, ssl=proxy_tls)
    connection = factory()
    transport.set_protocol(connection)
    if context is not None:
        tls = await loop.start_tls(transport, connection, context, server_hostname=uri.host)
        if tls is None:
            raise ConnectionLost("the proxy closed the tunnel during the TLS handshake")
        transport = tls
    connection.connection_made(transport)
    return connection


class ConnectionLost(ConnectionError):
    """The connection ended; ``close_code`` / ``close_reason`` say how, when the server said."""

    def __init__(self, message: str, close_code: int | None = None, close_reason: str = "") -> None:
        super().__init__(message)
        self.close_code = close_code
        self.close_reason = close_reason


class HandshakeRefused(ConnectionError):
    """The server answered the opening handshake with an HTTP status other than 101."""

    def __init__(self, response: Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.status = response.status_code
        self.headers = response.headers


class ReplySink(Protocol):
    """Where one reply goes: an ``asyncio.Future`` is one; the pool passes lighter ones."""

    def done(self) -> bool: ...

    def set_result(self, result: str | bytes, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


class Connection(asyncio.Protocol):
    """One client WebSocket connection; open it with :meth:`open`."""

    def __init__(
        self,
        protocol: ClientProtocol,
        loop: asyncio.AbstractEventLoop,
        headers: Mapping[str, str],
        ping_interval: float | None,
        ping_timeout: float | None,
    ) -> None:
        self.protocol = protocol
        self.loop = loop
        self.headers = headers
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.transport: asyncio.Transport | None = None
        self.opened: asyncio.Future[None] = loop.create_future()
        self.lost: asyncio.Future[None] = loop.create_future()
        self.waiters: deque[ReplySink] = deque()
        self.unsolicited: deque[str | bytes] = deque()
        self.fragments: list[bytes] = []
        self.fragment_text = False
        self.error: ConnectionLost | None = None
        self._ping_handle: asyncio.TimerHandle | None = None
        self._response: Response | None = None
        self._pong_due: float | None = None

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        max_size: int | None = None,
        ping_interval: float | None = None,
        ping_timeout: float | None = None,
        use_proxy: bool = True,
        compression: bool = False,
    ) -> Connection:
        """Connect to ``ws(s)://...`` and complete the opening handshake.

        A proxy from the environment (``https_proxy``, ``all_proxy``, ... and ``no_proxy``,
        as websockets reads them) is used unless ``use_proxy`` is False, as the
        websockets client did. ``compression`` offers permessage-deflate. Bound it with a timeout outside. Raises ``OSError`` (cannot connect),
        :class:`HandshakeRefused` (an HTTP status) or :class:`ConnectionLost`.
        """
        loop = asyncio.get_running_loop()
        uri = parse_uri(url)
        # websockets logs the handshake's headers (Authorization, the resume token) at DEBUG
        install_redaction((*CLIENT_LOGGERS, "openenv_runtime"))
        extensions = enable_client_permessage_deflate(None) if compression else None
        protocol = ClientProtocol(uri, max_size=max_size, extensions=extensions)
        context = ssl.create_default_context() if uri.secure else None

        def factory() -> Connection:
            return cls(protocol, loop, headers or {}, ping_interval, ping_timeout)

        proxy = _proxy_for(uri) if use_proxy else None
        if proxy is None:
            _, connection = await loop.create_connection(
                factory,
                uri.host,
                uri.port,
                ssl=context,
                server_hostname=uri.host if context else None,
            )
        else:
            connection = await _through_proxy(factory, uri, proxy, context)
        try:
            await connection.opened
        except BaseException:
            connection.abort()
            raise
        connection.schedule_ping()
        return connection

    # -- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        request = self.protocol.connect()
        request.headers["User-Agent"] = USER_AGENT
        for key, value in self.headers.items():
            request.headers[key] = value
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
        if self._ping_handle is not None:
            self._ping_handle.cancel()
        code = self.protocol.close_rcvd.code if self.protocol.close_rcvd else None
        reason = self.protocol.close_rcvd.reason if self.protocol.close_rcvd else ""
        if self.error is None:
            detail = f"code {code} {reason}".strip() if code is not None else "no close frame"
            self.error = ConnectionLost(f"the connection closed ({detail})", code, reason)
        if not self.opened.done():
            handshake = self.protocol.handshake_exc
            if isinstance(handshake, InvalidStatus):
                self.opened.set_exception(HandshakeRefused(handshake.response))
            else:
                self.opened.set_exception(handshake or self.error)
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(self.error)
        if not self.lost.done():
            self.lost.set_result(None)

    # -- protocol events -------------------------------------------------------------------
    def _process(self) -> None:
        # Data frames make the protocol write nothing; anything else (a handshake reply, a
        # ping to answer, a close to acknowledge, a protocol error) may. Flush only then.
        quiet = True
        for event in self.protocol.events_received():
            if isinstance(event, Response):
                quiet = False
                self._response = event
                if not self.opened.done():
                    handshake = self.protocol.handshake_exc
                    if isinstance(handshake, InvalidStatus):
                        self.opened.set_exception(HandshakeRefused(handshake.response))
                    elif handshake is not None:
                        self.opened.set_exception(handshake)
                    else:
                        self.opened.set_result(None)
                continue
            if not isinstance(event, Frame):
                quiet = False
                continue
            opcode = event.opcode
            if opcode is Opcode.TEXT or opcode is Opcode.BINARY:
                if event.fin:
                    data = bytes(event.data)
                    self._deliver(data.decode() if opcode is Opcode.TEXT else data)
                else:
                    self.fragments = [bytes(event.data)]
                    self.fragment_text = opcode is Opcode.TEXT
            elif opcode is Opcode.CONT:
                self.fragments.append(bytes(event.data))
                if event.fin:
                    data = b"".join(self.fragments)
                    self.fragments = []
                    self._deliver(data.decode() if self.fragment_text else data)
            else:
                quiet = False
                if opcode is Opcode.PONG:
                    self._pong_due = None
                # PING is answered and CLOSE acknowledged by the protocol itself (see _flush).
        if not quiet or self.protocol.state is not State.OPEN:
            self._flush()

    def _deliver(self, message: str | bytes) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():  # a cancelled waiter's reply is dropped with it
                waiter.set_result(message)
                return
        # A message nobody asked for: the server explaining why it is about to close (e.g.
        # CAPACITY_REACHED); it answers the next request.
        self.unsolicited.append(message)

    def _flush(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        for data in self.protocol.data_to_send():
            if data:
                transport.write(data)
            elif transport.can_write_eof():
                transport.write_eof()

    # -- keepalive: a server that stops answering is noticed even while a long step runs ----
    def schedule_ping(self) -> None:
        """Send a keepalive ping in ``ping_interval`` seconds (``open`` starts the pings once
        the handshake is done; each ping schedules the next)."""
        if self.ping_interval is not None and not self.lost.done():
            self._ping_handle = self.loop.call_later(self.ping_interval, self._ping)

    def _ping(self) -> None:
        if self.protocol.state is not State.OPEN:
            return
        now = self.loop.time()
        if self._pong_due is not None and now > self._pong_due:
            self.error = ConnectionLost(
                f"the server did not answer a keepalive ping within {self.ping_timeout}s"
            )
            self.abort()
            return
        if self._pong_due is None:
            self.protocol.send_ping(b"")
            self._flush()
            if self.ping_timeout is not None:
                self._pong_due = now + self.ping_timeout
        self.schedule_ping()

    # -- what the client uses ------------------------------------------------------------------
    @property
    def response(self) -> Response | None:
        """The server's handshake reply (its headers, e.g. for session resumption)."""
        return self._response

    @property
    def is_open(self) -> bool:
        return self.protocol.state is State.OPEN

    def submit(self, text: str) -> asyncio.Future[str | bytes]:
        """Send one frame; the future resolves to its reply (or raises :class:`ConnectionLost`)."""
        waiter: asyncio.Future[str | bytes] = self.loop.create_future()
        self.submit_to(text, waiter)
        return waiter

    def submit_to(self, text: str, sink: ReplySink) -> None:
        """Send one frame; its reply (or the :class:`ConnectionLost`) goes to ``sink``."""
        if self.unsolicited:
            sink.set_result(self.unsolicited.popleft())
            return
        if self.protocol.state is not State.OPEN:
            sink.set_exception(self.error or ConnectionLost("the connection is closed"))
            return
        self.protocol.send_text(text.encode())
        self._flush()
        self.waiters.append(sink)

    async def request(self, text: str) -> str | bytes:
        """Send ``text`` and return its reply."""
        return await self.submit(text)

    def send(self, text: str) -> None:
        """Send a frame that gets no reply (the protocol's ``close``)."""
        if self.protocol.state is State.OPEN:
            self.protocol.send_text(text.encode())
            self._flush()

    async def close(self, timeout: float = 5.0) -> None:
        """Closing handshake; aborts the TCP connection if the server does not finish it in time."""
        if self._ping_handle is not None:
            self._ping_handle.cancel()
        if self.protocol.state is State.OPEN:
            self.protocol.send_close(1000)
            self._flush()
        try:
            await asyncio.wait_for(asyncio.shield(self.lost), timeout)
        except (TimeoutError, asyncio.TimeoutError):
            self.abort()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
