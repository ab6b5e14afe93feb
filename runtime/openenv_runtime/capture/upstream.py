"""The capture proxy's HTTP/1.1 client to its one model server (the proxy's hot path).

Written by hand over an asyncio protocol and httptools' parser (both already under uvicorn)
because the general clients cost most of the proxy's CPU per call (aiohttp: ~250 µs of the
~950 µs measured in ``benchmarks/training/rollouts.py --parts overhead``). It does only what
the proxy needs: one upstream, keep-alive connections reused, each request written in one
piece, the answer (sized or chunked) handed over chunk by chunk as it arrives, a total time
limit per call, one retry when a reused connection turns out closed before any answer.

Two faces: :meth:`Upstream.send` hands the answer to an :class:`Answer` (plain callbacks, no
task: the proxy's own HTTP protocol relays it that way), and :meth:`Upstream.request` awaits a
:class:`Response` (the ASGI path).
"""

from __future__ import annotations

import asyncio
import ssl
import time
import urllib.parse
from collections import deque
from collections.abc import AsyncIterator
from typing import Protocol

import httptools

_IDLE_SECONDS = 4.0  # under uvicorn's 5 s keep-alive: a server rarely closes one we reuse
_MAX_IDLE = 256
_PAUSE_AT = 1 << 20  # bytes received and not yet handed over: stop reading the socket
_DELIMITING = (b"content-length", b"transfer-encoding")


class UpstreamError(ConnectionError):
    """The model server could not be reached, or broke off or garbled its answer."""


class Answer(Protocol):
    """What receives one answer as it arrives: :meth:`head` once, :meth:`body` per chunk
    (chunked encoding removed), then :meth:`end`; or :meth:`fail` instead, at any point."""

    def head(self, status: int, headers: list[tuple[bytes, bytes]]) -> None: ...

    def body(self, chunk: bytes) -> None: ...

    def end(self) -> None: ...

    def fail(self, error: BaseException) -> None: ...


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
        self._headers: dict[str, str] | None = None  # the last request's, and their lines
        self._lines = b""
        # the calls under way, for their time limits: one timer for all of them, set for the
        # earliest (a timer per call cost ~2 µs to make and cancel, more with cold caches)
        self._pending: set[Call] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._timer_loop: asyncio.AbstractEventLoop | None = None

    def send(
        self,
        method: str,
        target: str,
        body: bytes,
        headers: dict[str, str],
        timeout: float,
        answer: Answer,
    ) -> Call:
        """Send one request (``target``: path and query under the prefix); ``answer`` gets the
        answer as it arrives, all of it within ``timeout`` seconds, or the error."""
        if headers != self._headers:
            self._lines = b"".join(_header_lines(headers))
            self._headers = dict(headers)
        line = f"{method} {self.prefix}{target} HTTP/1.1\r\nhost: ".encode("latin-1")
        length = b"content-length: %d\r\n\r\n" % len(body) if body or method == "POST" else b"\r\n"
        data = b"".join((line, self.host_header, b"\r\n", self._lines, length, body))
        call = Call(self, data, timeout, answer)
        connection = self.reuse()
        if connection is None:
            call.connect()
        else:
            call.retry = True  # a reused connection may have been closed meanwhile: once more
            connection.start(call)
        return call

    async def request(
        self, method: str, target: str, body: bytes, headers: dict[str, str], timeout: float
    ) -> Response:
        """:meth:`send`, awaited: the answer once its status and headers are in. Release it
        (:meth:`Response.release`) when done."""
        response = Response()
        response.call = self.send(method, target, body, headers, timeout, response)
        await response.head_received()
        return response

    def reuse(self) -> _Connection | None:
        """An idle connection still fresh, or None."""
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed and now - connection.idle_since < _IDLE_SECONDS:
                return connection
            connection.close()
        return None

    async def connect(self, timeout: float) -> _Connection:
        """A new connection to the model server."""
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

    def watch(self, call: Call) -> None:
        """Time ``call`` until :meth:`settled`: at its ``deadline`` it times out."""
        self._pending.add(call)
        # the timer's loop still running is this loop: asyncio.get_running_loop() is asked
        # only to set a timer, as Python 3.11's makes a getpid system call each time
        timer_loop = self._timer_loop
        if (
            self._timer is None
            or call.deadline < self._timer_at
            or timer_loop is None
            or not timer_loop.is_running()
        ):
            if self._timer is not None:
                self._timer.cancel()
            self._arm(call.deadline, asyncio.get_running_loop())

    def settled(self, call: Call) -> None:
        """``call`` is over: no longer timed."""
        self._pending.discard(call)

    def _arm(self, at: float, loop: asyncio.AbstractEventLoop) -> None:
        self._timer_at, self._timer_loop = at, loop
        self._timer = loop.call_later(max(0.0, at - time.monotonic()), self._expire)

    def _expire(self) -> None:
        self._timer = None
        now = time.monotonic()
        for call in [c for c in self._pending if c.deadline <= now]:
            call.timed_out()
        if self._pending and self._timer_loop is not None:
            self._arm(min(c.deadline for c in self._pending), self._timer_loop)

    def keep(self, connection: _Connection) -> None:
        """Take back a connection whose answer was read to its end."""
        if len(self._idle) >= _MAX_IDLE:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        self._idle.append(connection)

    def close(self) -> None:
        """Close the idle connections (those in use close as their calls end)."""
        while self._idle:
            self._idle.pop().close()


def _header_lines(headers: dict[str, str]) -> list[bytes]:
    lines = []
    for name, value in headers.items():
        if "\r" in value or "\n" in value:
            raise ValueError(f"header {name} holds a line break")
        lines.append(f"{name}: {value}\r\n".encode("latin-1"))
    return lines


class Call:
    """One request under way: its connection, time limit and one retry. The answer's receiver
    may :meth:`pause` and :meth:`resume` reading it, or :meth:`cancel` it."""

    __slots__ = (
        "answer",
        "connecting",
        "connection",
        "data",
        "deadline",
        "done",
        "headed",
        "retry",
        "timeout",
        "upstream",
    )

    def __init__(self, upstream: Upstream, data: bytes, timeout: float, answer: Answer) -> None:
        self.upstream = upstream
        self.data = data
        self.timeout = timeout
        self.answer = answer
        self.connection: _Connection | None = None
        self.connecting: asyncio.Task[_Connection] | None = None
        self.retry = False
        self.done = False
        self.headed = False
        self.deadline = time.monotonic() + timeout
        upstream.watch(self)

    def connect(self) -> None:
        """Open a new connection, then send on it."""
        self.connecting = asyncio.ensure_future(self.upstream.connect(self.timeout))
        self.connecting.add_done_callback(self.connected)

    def connected(self, task: asyncio.Task[_Connection]) -> None:
        self.connecting = None
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self.finish(error)
        elif self.done:  # timed out or cancelled meanwhile
            task.result().close()
        else:
            task.result().start(self)

    def pause(self) -> None:
        """Stop reading the answer for now (the receiver cannot keep up)."""
        if self.connection is not None:
            self.connection.pause()

    def resume(self) -> None:
        if self.connection is not None:
            self.connection.resume()

    def cancel(self) -> None:
        """Drop the call (its answer is no longer wanted): its connection is closed unless the
        answer had ended."""
        if not self.done:
            self.done = True
            self.upstream.settled(self)
            if self.connecting is not None:
                self.connecting.cancel()
            if self.connection is not None:
                self.connection.close()
            self.answer = _ENDED

    def timed_out(self) -> None:
        if self.connection is not None:
            self.connection.abort()
        self.finish(TimeoutError(f"no whole answer within {self.timeout:g} s"))

    # -- from the connection ---------------------------------------------------------------
    def on_head(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        if self.done:
            return
        self.headed = True
        self.answer.head(status, headers)

    def on_body(self, chunk: bytes) -> None:
        if not self.done:
            self.answer.body(chunk)

    def on_end(self, keep_alive: bool) -> None:
        """The answer ended (the connection is handed back when it may be reused)."""
        connection, self.connection = self.connection, None
        if connection is not None:
            if keep_alive and not connection.closed and not connection.paused:
                self.upstream.keep(connection)
            else:
                connection.close()
        self.finish(None)

    def on_lost(self, error: UpstreamError, received: bool, until_close: bool = False) -> None:
        """The connection closed, or garbled the answer; ``received``: any byte of it came;
        ``until_close``: the answer's head gave no length (its body ends with the connection)."""
        self.connection = None
        if self.done:
            return
        if self.headed and until_close and not isinstance(error, _Garbled):
            self.finish(None)  # an answer without a length ends with its connection
        elif self.retry and not received:
            self.retry = False
            self.connect()
        else:
            self.finish(error)

    def finish(self, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        self.upstream.settled(self)
        # the answer and the call refer to each other: let go, so that both are freed at once
        # (a cycle would hold them, and the session they record into, until a collection)
        answer, self.answer = self.answer, _ENDED
        if error is None:
            answer.end()
        else:
            answer.fail(error)


class _Ended:
    """The answer of a call that is over: nothing more reaches it."""

    def head(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        return None

    def body(self, chunk: bytes) -> None:
        return None

    def end(self) -> None:
        return None

    def fail(self, error: BaseException) -> None:
        return None


_ENDED = _Ended()


class Response:
    """One answer awaited (:meth:`Upstream.request`): ``status``, ``headers`` (raw, as sent),
    then its body via :meth:`chunks` or :meth:`read`."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.call: Call | None = None
        self.complete = False
        self.error: BaseException | None = None
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._whole = False
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._head: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def head_received(self) -> None:
        """Wait for the status and headers (raises the call's error instead)."""
        try:
            await self._head
        except BaseException:
            self.release()
            raise

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's chunks (chunked encoding removed), as they arrive."""
        while True:
            while self._chunks:
                chunk = self._chunks.popleft()
                self._buffered -= len(chunk)
                if self._paused and self._buffered < _PAUSE_AT // 2 and self.call is not None:
                    self._paused = False
                    self.call.resume()
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

    def release(self) -> None:
        """Done with the answer: its connection is closed unless the answer had ended."""
        if self.call is not None:
            self.call.cancel()

    # -- Answer ------------------------------------------------------------------------------
    def head(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.status, self.headers = status, headers
        if not self._head.done():
            self._head.set_result(None)

    def body(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._buffered += len(chunk)
        if self._buffered > _PAUSE_AT and not self._whole and self.call is not None:
            self._paused = True
            self.call.pause()
        self._wake()

    def end(self) -> None:
        self.complete = True
        self._wake()

    def fail(self, error: BaseException) -> None:
        self.error = error
        if not self._head.done():
            self._head.set_exception(error)
            self._head.exception()  # retrieved: never "exception was never retrieved"
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        self._waiter = None


class _Garbled(UpstreamError):
    """The model server's bytes are not an HTTP answer."""


class _Connection(asyncio.Protocol):
    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.transport: asyncio.Transport | None = None
        self.call: Call | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.headers: list[tuple[bytes, bytes]] = []
        self.closed = False
        self.paused = False
        self.received = False
        self.idle_since = 0.0

    def start(self, call: Call) -> None:
        """Send ``call``'s request; its answer goes to it."""
        assert self.transport is not None
        self.call = call
        call.connection = self
        self.received = False
        if self.closed:  # closed while idle, unnoticed: as if it closed before any answer
            self.call = None
            call.on_lost(UpstreamError("the model server closed the connection"), False)
            return
        self.transport.write(call.data)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self.closed = True
        self.call = None
        if self.transport is not None:
            self.transport.abort()

    def pause(self) -> None:
        if not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport

    def data_received(self, data: bytes) -> None:
        if self.call is None:  # nothing asked: not HTTP we expect
            self.close()
            return
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as error:
            call, self.call = self.call, None
            self.close()
            if call is not None:
                call.on_lost(_Garbled(f"the model server's answer is not HTTP: {error}"), True)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        call, self.call = self.call, None
        if call is not None:
            headers = self.headers
            until_close = not any(name.lower() in _DELIMITING for name, _ in headers)
            error = UpstreamError("the model server closed the connection")
            call.on_lost(error, self.received, until_close)

    # -- httptools' callbacks -----------------------------------------------------------------
    def on_message_begin(self) -> None:
        self.headers = []

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self.call is not None:
            self.call.on_head(self.parser.get_status_code(), self.headers)

    def on_body(self, body: bytes) -> None:
        if self.call is not None:
            self.call.on_body(body)

    def on_message_complete(self) -> None:
        call, self.call = self.call, None
        if call is not None:
            call.on_end(self.parser.should_keep_alive())
