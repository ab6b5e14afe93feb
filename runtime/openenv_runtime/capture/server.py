"""The capture proxy's HTTP/1.1 protocol: the forwarded calls answered below ASGI.

Through uvicorn's ASGI layer every forwarded call paid for a scope, a request-response cycle,
a task, its ``receive`` and ``send`` messages and their checks: measured, a bare ASGI app
answering a fixed body cost ~2× the CPU of the same answer from a plain asyncio protocol, and
that was most of the proxy's own budget. So :func:`protocol_for` gives uvicorn (``http=``) a
protocol that is uvicorn's own httptools protocol, except that a forwarded call
(:data:`~openenv_runtime.capture.proxy.FORWARDED_ROUTES`) of the usual kind is read, checked,
forwarded and relayed right here, in plain callbacks: the request's bytes as they arrive,
the model server's answer through :meth:`Upstream.send`, written back to the client's
transport chunk by chunk. The checks, the body's token options and the recording are the
proxy's own (``CaptureProxy.admit``, ``chat_body``, ``record``), the same as on the ASGI path.
So are the routes every session takes (its start, its read-back, its end:
``CaptureProxy.answer_session_route``), answered here once the request is read.

Everything else takes uvicorn's ASGI path to ``CaptureProxy.__call__`` unchanged, its scope
built only then: the other routes, any path that needs decoding (a ``%``, a backslash, a dot
segment), a request pipelined behind one still being answered, HTTP/1.0,
``Expect: 100-continue``, an upgrade, a session's start behind a front that sets
``X-Forwarded-*`` headers (or with a ``root_path``), and every call while tracing is on.

Limits on every request of a connection (both paths): its head (request line and headers)
at most :data:`MAX_HEAD_BYTES` bytes in at most :data:`MAX_HEADERS` headers (else 431 and the
connection closes), and the whole request, head and body, within ``request_timeout`` seconds
of its first byte (a new connection's first request: of the connection's start), else 408
and the connection closes; between requests, uvicorn's keep-alive timeout. Each of the two
is one timer per connection, set again when it goes off (a timer made and cancelled per
request cost a measured part of the proxy's CPU per call). A forwarded
body over ``max_body_bytes`` gets 413 as soon as it is known (its declared length, or the
bytes read) and the connection closes.

The protocol reads uvicorn's own protocol's state (its cycle, pipeline and flow control):
:data:`TESTED` names the uvicorn versions it is tested with; with another, :func:`protocol_for`
says so in one log line and gives uvicorn's own protocol (every call through ASGI).
"""

from __future__ import annotations

import logging
import time
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from .proxy import (
    CaptureProxy,
    Refused,
    error_body,
    forwarded_route,
    needs_decoding,
    relayed,
    session_route,
    unreachable,
)
from .upstream import Call

logger = logging.getLogger("openenv_runtime.capture")

TESTED = ((0, 54), (0, 54))
"""The uvicorn versions (major, minor; first and last) the protocol is tested with."""
MAX_HEAD_BYTES = 64 << 10
"""The most bytes read while a request's head (request line and headers) is incomplete,
past the read that began it."""
MAX_HEADERS = 100
"""The most headers one request may carry."""

_CLOSE = (
    b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s"
)


def protocol_for(proxy: CaptureProxy) -> type | str:
    """uvicorn's ``http=`` for ``proxy``: this module's protocol bound to it, or ``"auto"``
    (uvicorn's own: every call through ASGI) with an untested uvicorn."""
    found = _uvicorn_version()
    if found is None or not TESTED[0] <= found <= TESTED[1]:
        logger.warning(
            "the capture proxy serves every call through ASGI: its own protocol is tested "
            "with uvicorn %d.%d-%d.%d, not %s",
            *TESTED[0],
            *TESTED[1],
            ".".join(map(str, found)) if found else "an unknown version",
        )
        return "auto"
    return type("CaptureProtocol", (CaptureProtocol,), {"proxy": proxy})


def _uvicorn_version() -> tuple[int, int] | None:
    try:
        major, minor = (int(part) for part in version("uvicorn").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return None
    return major, minor


class _HeadTooLarge(Exception):
    pass


class CaptureProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with the forwarded calls answered here (see above)."""

    proxy: ClassVar[CaptureProxy]
    exchange: _Exchange | None = None  # the forwarded request being read
    current: _Exchange | None = None  # the forwarded call until its answer ends
    in_head = False  # between a request's first byte and the end of its headers
    head_bytes = 0  # bytes read meanwhile (from the read after the first)
    deadline: Any = None  # the timer of the requests' time limit (see ``overdue``)
    request_began: float | None = None  # loop time the request being read began
    idle_since: float | None = None  # loop time the last answer ended, while nothing came since
    refusal: bytes | None = None

    # uvicorn's state (set by its protocol)
    url: bytes
    headers: list[tuple[bytes, bytes]]
    cycle: Any
    expect_100_continue: bool

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.request_began = self.loop.time()
        self.deadline = self.loop.call_later(self.proxy.request_timeout, self.overdue)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        if self.timeout_keep_alive_task is not None:
            self.timeout_keep_alive_task.cancel()
            self.timeout_keep_alive_task = None
        if self.current is not None:
            self.current.client_gone()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        if self.in_head:  # counted per read, not per header: a callback per header cost more
            self.head_bytes += len(data)
            if self.head_bytes > MAX_HEAD_BYTES:
                message = f"the request's head is over {MAX_HEAD_BYTES} bytes"
                self.close_with(_closing(431, b"Request Header Fields Too Large", message))
                return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError:
            refusal, self.refusal = self.refusal, None
            if refusal is None:
                self.logger.warning("Invalid HTTP request received.")
                refusal = _closing(400, b"Bad Request", "invalid HTTP request")
            self.close_with(refusal)

    def close_with(self, refusal: bytes) -> None:
        """Answer ``refusal`` (unless a forwarded answer is under way: not to be cut) and close."""
        if self.current is None or self.current is self.exchange:
            self.transport.write(refusal)
        self.transport.close()

    # -- keep-alive: like the requests' time limit, one timer set again only when it goes off
    def _unset_keepalive_if_required(self) -> None:
        self.idle_since = None  # uvicorn calls it as bytes arrive: no longer idle

    def on_response_complete(self) -> None:
        # uvicorn's own, but for the keep-alive timer (see keep_alive_due)
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
            return
        self.idle_since = self.loop.time()
        if self.timeout_keep_alive_task is None:
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.keep_alive_due
            )

    def keep_alive_due(self) -> None:
        """The keep-alive timer: close a connection idle for uvicorn's ``timeout_keep_alive``
        seconds, or set the timer again for when the one idle now would be."""
        self.timeout_keep_alive_task = None
        since = self.idle_since
        if since is None:  # busy: the next answer's end sets the timer again
            return
        left = since + self.timeout_keep_alive - self.loop.time()
        if left > 0:
            self.timeout_keep_alive_task = self.loop.call_later(left, self.keep_alive_due)
            return
        self.timeout_keep_alive_handler()

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.current is not None:
            self.current.writable()

    def overdue(self) -> None:
        """The requests' timer: the request being read did not arrive whole in time, or
        else the timer is set again for the one being read now (if any).

        One timer serves the connection's requests, set again only when it goes off: a
        timer made and cancelled per request cost ~2 µs each (and more between calls, the
        caches cold), a good part of the proxy's CPU per call."""
        self.deadline = None
        began = self.request_began
        if began is None:  # between requests: the keep-alive timeout's business
            return
        timeout = self.proxy.request_timeout
        left = began + timeout - self.loop.time()
        if left > 0:  # a later request than the one the timer was set for
            self.deadline = self.loop.call_later(left, self.overdue)
            return
        if self.flow.read_paused:  # the proxy stopped reading (a pipelined request waits)
            self.request_began = self.loop.time()
            self.deadline = self.loop.call_later(timeout, self.overdue)
            return
        cycle = self.cycle
        if getattr(cycle, "response_started", False):  # an answer begun is not cut: only closed
            self.transport.close()
            return
        message = f"the request did not arrive whole within {self.proxy.request_timeout:g} s"
        self.close_with(_closing(408, b"Request Timeout", message))

    # -- httptools' callbacks ----------------------------------------------------------------
    def on_message_begin(self) -> None:
        # uvicorn's, but for its ASGI scope: built by to_asgi, for a request that goes there
        self.url = b""
        self.expect_100_continue = False
        self.headers = []
        self.in_head, self.head_bytes = True, 0
        if self.request_began is None:
            self.request_began = self.loop.time()
        if self.deadline is None:
            self.deadline = self.loop.call_later(self.proxy.request_timeout, self.overdue)

    def on_headers_complete(self) -> None:
        self.in_head = False
        if len(self.headers) > MAX_HEADERS:
            message = f"the request has over {MAX_HEADERS} headers"
            self.refusal = _closing(431, b"Request Header Fields Too Large", message)
            raise _HeadTooLarge
        url = self.url
        path, _, query = url.partition(b"?")
        cycle = self.cycle
        parser = self.parser
        if (
            path[:4] not in (b"/v1/", b"/ses")
            or needs_decoding(path)
            or url.find(b"#") >= 0
            or (cycle is not None and not cycle.response_complete)  # pipelined: queued
            or self.proxy.tracer is not None
            or self.expect_100_continue
            or parser.get_http_version() != "1.1"
            or parser.should_upgrade()
        ):
            self.to_asgi()
            return
        text = path.decode("latin-1")
        route = forwarded_route(text)
        method = parser.get_method().decode("ascii")
        if route is None:
            self.session_call(method, text)
            return
        if method == "HEAD":  # an answer without a body: uvicorn's to write
            self.to_asgi()
            return
        exchange = _Exchange(self, method, route[1], parser.should_keep_alive())
        self.cycle = self.exchange = self.current = exchange
        try:
            exchange.session, exchange.target = self.proxy.admit(
                method, route[0], route[1], dict(self.headers), query
            )
        except Refused as refused:
            exchange.refuse(refused)

    def to_asgi(self) -> None:
        """Hand the request being read to uvicorn's ASGI path, its scope built now."""
        url, headers, expect = self.url, self.headers, self.expect_100_continue
        super().on_message_begin()
        self.url, self.headers, self.expect_100_continue = url, headers, expect
        self.scope["headers"] = headers
        super().on_headers_complete()

    def session_call(self, method: str, path: str) -> None:
        """A route every session takes (its start, read-back and end: ``session_route``),
        answered here once the request is read; any other request goes to ASGI."""
        headers = dict(self.headers)
        root = ""
        if method == "POST":  # the session's URLs start with the proxy's as the client sees it
            host = headers.get(b"host")
            if (
                host is None
                or self.root_path
                or b"x-forwarded-proto" in headers
                or b"x-forwarded-for" in headers
            ):  # uvicorn's ASGI path knows what these mean
                self.to_asgi()
                return
            root = f"{self.scheme}://{host.decode('latin-1')}"
        if not session_route(method, path):
            self.to_asgi()
            return
        exchange = _Exchange(self, method, "", self.parser.should_keep_alive())
        exchange.local, exchange.local_headers, exchange.local_root = path, headers, root
        self.cycle = self.exchange = self.current = exchange

    def on_body(self, body: bytes) -> None:
        exchange = self.exchange
        if exchange is None:
            super().on_body(body)
        else:
            exchange.add(body)

    def on_message_complete(self) -> None:
        self.request_began = None  # read whole: its timer, when it goes off, finds nothing due
        exchange = self.exchange
        if exchange is None:
            super().on_message_complete()
        else:
            self.exchange = None
            exchange.forward()


_DEFAULTS: list[Any] = [None, b""]  # uvicorn's default headers (a new list each second), as lines


def _defaults(headers: list[tuple[bytes, bytes]]) -> bytes:
    """The lines of uvicorn's default headers (``date``, ``server``) every answer carries."""
    if headers is not _DEFAULTS[0]:
        _DEFAULTS[:] = [headers, b"".join(n + b": " + v + b"\r\n" for n, v in headers)]
    lines: bytes = _DEFAULTS[1]
    return lines


def _closing(status: int, phrase: bytes, message: str) -> bytes:
    body = error_body(message)
    return _CLOSE % (status, phrase, len(body), body)


class _NoEvent:
    """uvicorn's protocol sets its cycle's event when the connection is lost: nothing waits."""

    @staticmethod
    def set() -> None:
        return None


class _Exchange:
    """One forwarded call: its request as read, then the model server's answer relayed (an
    ``upstream.Answer``). Also stands as the protocol's current cycle for uvicorn's
    bookkeeping (``response_complete``, ``keep_alive``, ``disconnected``)."""

    message_event = _NoEvent
    __slots__ = (
        "answer_headers",
        "call",
        "chat",
        "disconnected",
        "keep_alive",
        "local",
        "local_headers",
        "local_root",
        "method",
        "parts",
        "paused",
        "protocol",
        "refused",
        "request",
        "response_complete",
        "session",
        "size",
        "started",
        "status",
        "stream",
        "streaming",
        "target",
        "timestamp",
    )

    def __init__(self, protocol: CaptureProtocol, method: str, route: str, keep: bool) -> None:
        self.protocol = protocol
        self.method = method
        self.chat = route == "chat/completions" and method == "POST"
        self.keep_alive = keep
        self.session: Any = None
        self.target = ""
        self.refused: Refused | None = None
        self.parts: list[bytes] = []
        self.size = 0
        self.call: Call | None = None
        self.request: dict[str, Any] = {}  # a chat completion's body, as sent upstream
        self.stream = False
        self.streaming = False
        self.paused = False
        self.status = 0
        self.answer_headers: list[tuple[bytes, bytes]] = []
        self.timestamp = self.started = 0.0
        self.response_complete = False
        self.disconnected = False
        self.local: str | None = None  # a session route's path: answered by the proxy itself
        self.local_headers: dict[bytes, bytes] = {}
        self.local_root = ""

    # -- the request -------------------------------------------------------------------------
    def refuse(self, refused: Refused) -> None:
        """Answer ``refused`` once the request is read; a body too large: at once, and close."""
        self.refused = refused
        if refused.status == 413:
            self.keep_alive = False
            self.error(refused.status, refused.message)

    def add(self, chunk: bytes) -> None:
        if self.refused is not None or self.local is not None:
            return  # read and dropped
        self.size += len(chunk)
        if self.size > self.protocol.proxy.max_body_bytes:
            self.parts = []
            self.refuse(self.protocol.proxy.too_large())
            return
        self.parts.append(chunk)

    def forward(self) -> None:
        """The request is whole: answer a refusal, or send it to the model server."""
        if self.refused is not None:
            if not self.response_complete:
                self.error(self.refused.status, self.refused.message)
            return
        proxy = self.protocol.proxy
        if self.local is not None:
            status, body = proxy.answer_session_route(
                self.method, self.local, self.local_headers, self.local_root
            )
            headers = [(b"content-type", b"application/json")] if status != 204 else []
            self.write(self.response_head(status, headers, len(body)) + body)
            self.complete()
            return
        parts = self.parts
        raw = parts[0] if len(parts) == 1 else b"".join(parts)
        self.parts = []
        if self.chat:
            try:
                self.request, raw, self.stream = proxy.chat_body(raw)
            except Refused as refused:
                self.error(refused.status, refused.message)
                return
        self.timestamp, self.started = time.time(), time.perf_counter()
        try:
            self.call = proxy.model_server.send(
                self.method, self.target, raw, proxy.upstream_headers(), proxy.timeout, self
            )
        except ValueError as error:  # the proxy's own upstream key cannot go in a header
            self.error(502, unreachable(error))

    # -- the answer (upstream.Answer) -----------------------------------------------------------
    def head(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.status = status
        if self.stream and status == 200:
            self.streaming = True
            self.write(self.response_head(status, headers, None))
        else:
            self.answer_headers = headers

    def body(self, chunk: bytes) -> None:
        self.parts.append(chunk)
        if self.streaming:
            self.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
            if self.protocol.flow.write_paused and self.call is not None:
                self.paused = True  # the client does not read: nor does the proxy upstream
                self.call.pause()

    def end(self) -> None:
        parts, self.parts = self.parts, []
        content = parts[0] if len(parts) == 1 else b"".join(parts)
        if self.chat:
            latency = (time.perf_counter() - self.started) * 1000
            # recorded before the answer ends: a reader sees it at once
            proxy = self.protocol.proxy
            proxy.record(
                self.session,
                self.status,
                self.timestamp,
                self.request,
                content,
                self.stream,
                latency,
            )
        if self.streaming:
            self.write(b"0\r\n\r\n")
        else:
            head = self.response_head(self.status, self.answer_headers, len(content))
            self.write(head + content)
        self.complete()

    def fail(self, error: BaseException) -> None:
        if self.streaming:  # the answer broke off midway: so does the relayed one
            self.keep_alive = False
            self.complete()
        else:
            self.error(502, unreachable(error))

    # -- the client's side ------------------------------------------------------------------------
    def client_gone(self) -> None:
        self.disconnected = True
        if self.call is not None and not self.response_complete:
            self.call.cancel()

    def writable(self) -> None:
        if self.paused and self.call is not None:
            self.paused = False
            self.call.resume()

    def write(self, data: bytes) -> None:
        if not self.disconnected:
            self.protocol.transport.write(data)

    def response_head(
        self, status: int, headers: list[tuple[bytes, bytes]], length: int | None
    ) -> bytes:
        lines = [STATUS_LINE.get(status) or b"HTTP/1.1 %d \r\n" % status]
        lines.append(_defaults(self.protocol.server_state.default_headers))
        for name, value in relayed(headers):
            lines += (name, b": ", value, b"\r\n")
        if status == 204:  # neither a length nor a body
            pass
        elif length is None:
            lines.append(b"transfer-encoding: chunked\r\n")
        else:
            lines.append(b"content-length: %d\r\n" % length)
        if not self.keep_alive:
            lines.append(b"connection: close\r\n")
        lines.append(b"\r\n")
        return b"".join(lines)

    def error(self, status: int, message: str) -> None:
        body = error_body(message)
        headers = [(b"content-type", b"application/json")]
        self.write(self.response_head(status, headers, len(body)) + body)
        self.complete()

    def complete(self) -> None:
        if self.response_complete:
            return
        self.response_complete = True
        self.call = None  # the call is over: no cycle through it
        protocol = self.protocol
        if protocol.current is self:
            protocol.current = None
        if not self.keep_alive:
            protocol.transport.close()
        if not self.disconnected:
            protocol.on_response_complete()
