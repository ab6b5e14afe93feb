"""The capture proxy's HTTP/1.1 client to its one model server (the proxy's hot path).

Written by hand over an asyncio protocol and httptools' parser (both already under uvicorn)
because the general clients cost most of the proxy's CPU per call (aiohttp: ~250 µs of the
~950 µs measured in ``benchmarks/training/rollouts.py --parts overhead``). It does only what
the proxy needs: one upstream, keep-alive connections reused, each request written in one
piece, the answer (sized or chunked) handed over chunk by chunk as it arrives, a total time
limit per call, one retry when a reused connection turns out closed before any answer.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import urllib.parse
from collections import deque
from collections.abc import AsyncIterator

import httptools

_IDLE_SECONDS = 4.0  # under uvicorn's 5 s keep-alive: a server rarely closes one we reuse
_MAX_IDLE = 256
_PAUSE_AT = 1 << 20  # bytes received and not yet handed over: stop reading the socket


class UpstreamError(ConnectionError):
    """The model server could not be reached, or broke off or garbled its answer."""


class Upstream:
    """Connections to the model server at ``base`` (``scheme://host[:port][/prefix]``)."""

    def __init__(self, base: str) -> None:
        self.base = base
        parts = urllib.parse.urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the model server's URL must be http(s)://host[:port]: {base!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self.prefix = parts.path.rstrip("/")
        default = self.port == (443 if self.ssl else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = (host if default else f"{host}:{self.port}").encode("idna")
        self._idle: deque[_Connection] = deque()

    async def request(
        self, method: str, target: str, body: bytes, headers: dict[str, str], timeout: float
    ) -> Response:
        """Send one request (``target``: path and query under the prefix); the answer once
        its status and headers are in, all of it within ``timeout`` seconds. Release it
        (``Response.release``) when done."""
        head = [f"{method} {self.prefix}{target} HTTP/1.1\r\n".encode("latin-1")]
        head.append(b"host: " + self.host_header + b"\r\n")
        for name, value in headers.items():
            if "\r" in value or "\n" in value:
                raise ValueError(f"header {name} holds a line break")
            head.append(f"{name}: {value}\r\n".encode("latin-1"))
        if body or method == "POST":
            head.append(b"content-length: %d\r\n" % len(body))
        head.append(b"\r\n")
        data = b"".join(head) + body
        connection = self._reuse()
        if connection is not None:
            try:
                return await connection.send(data, timeout)
            except UpstreamError:
                if connection.received:  # the server had begun to answer: no second try
                    raise
        connection = await self._connect(timeout)
        return await connection.send(data, timeout)

    def _reuse(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed and now - connection.idle_since < _IDLE_SECONDS:
                return connection
            connection.close()
        return None

    async def _connect(self, timeout: float) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            transport, connection = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Connection(self),
                    self.host,
                    self.port,
                    ssl=self.ssl,
                    server_hostname=self.host if self.ssl else None,
                ),
                timeout,
            )
        except OSError as error:
            raise UpstreamError(f"cannot connect to {self.host}:{self.port}: {error}") from error
        connection.transport = transport  # uvloop may call connection_made after this returns
        return connection

    def keep(self, connection: _Connection) -> None:
        """Take back a connection whose answer was read to its end."""
        if len(self._idle) >= _MAX_IDLE:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        self._idle.append(connection)

    def close(self) -> None:
        """Close the idle connections (those in use close as they are released)."""
        while self._idle:
            self._idle.pop().close()


class Response:
    """One answer: ``status``, ``headers`` (raw, as sent), then its body via :meth:`chunks`
    or :meth:`read`."""

    def __init__(self, connection: _Connection) -> None:
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self._connection = connection
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._whole = False
        self._waiter: asyncio.Future[None] | None = None
        self._head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.complete = False
        self.keep_alive = False
        self.error: BaseException | None = None

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's chunks (chunked encoding removed), as they arrive."""
        connection = self._connection
        while True:
            while self._chunks:
                chunk = self._chunks.popleft()
                self._buffered -= len(chunk)
                if connection.paused and self._buffered < _PAUSE_AT // 2:
                    connection.resume()
                yield chunk
            if self.error is not None:
                raise self.error
            if self.complete:
                return
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter

    async def read(self) -> bytes:
        """The whole body."""
        self._whole = True  # the whole body is wanted: never stop reading
        while not self.complete and self.error is None:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        if self.error is not None:
            raise self.error
        parts, self._buffered = list(self._chunks), 0
        self._chunks.clear()
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def until_close(self) -> bool:
        """Whether the body has no length and ends with the connection."""
        delimiting = (b"content-length", b"transfer-encoding")
        return not any(name.lower() in delimiting for name, _ in self.headers)

    def release(self) -> None:
        """Hand the connection back (an answer read to its end) or close it."""
        self._connection.finish(self)

    # -- from the connection ---------------------------------------------------------------
    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        self._waiter = None

    def _add(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._buffered += len(chunk)
        if self._buffered > _PAUSE_AT and not self._whole:
            self._connection.pause()
        self._wake()

    def _fail(self, error: BaseException) -> None:
        if self.complete or self.error is not None:
            return
        self.error = error
        if not self._head.done():
            self._head.set_exception(error)
            self._head.exception()  # retrieved: never "exception was never retrieved"
        self._wake()


class _Connection(asyncio.Protocol):
    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.transport: asyncio.Transport | None = None
        self.response: Response | None = None
        self.parser: httptools.HttpResponseParser | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.closed = False
        self.paused = False
        self.received = False
        self.idle_since = 0.0

    async def send(self, data: bytes, timeout: float) -> Response:
        assert self.transport is not None
        response = self.response = Response(self)
        self.parser = httptools.HttpResponseParser(self)
        self.received = False
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(timeout, self._timed_out, timeout)
        try:
            self.transport.write(data)
            await response._head
        except BaseException:
            self.finish(response)
            raise
        return response

    def finish(self, response: Response) -> None:
        if self.response is not response:
            return
        self.response = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if response.complete and response.keep_alive and not self.closed and not self.paused:
            self.upstream.keep(self)
        else:
            self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def pause(self) -> None:
        if not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()

    def _timed_out(self, timeout: float) -> None:
        if self.response is not None:
            self.response._fail(TimeoutError(f"no whole answer within {timeout:g} s"))
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport

    def data_received(self, data: bytes) -> None:
        if self.response is None or self.parser is None:  # nothing asked: not HTTP we expect
            self.close()
            return
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as error:
            self.response._fail(UpstreamError(f"the model server's answer is not HTTP: {error}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        response = self.response
        if response is None:
            return
        if response._head.done() and response.error is None and response.until_close():
            response.complete = True  # an answer without a length ends with its connection
            response._wake()
        else:
            response._fail(UpstreamError("the model server closed the connection"))

    # -- httptools' callbacks -----------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        if self.response is not None:
            self.response.headers.append((name, value))

    def on_headers_complete(self) -> None:
        response, parser = self.response, self.parser
        if response is not None and parser is not None:
            response.status = parser.get_status_code()
            if not response._head.done():
                response._head.set_result(None)

    def on_body(self, body: bytes) -> None:
        if self.response is not None:
            self.response._add(body)

    def on_message_complete(self) -> None:
        response, parser = self.response, self.parser
        if response is not None and parser is not None:
            response.keep_alive = parser.should_keep_alive()
            response.complete = True
            response._wake()
