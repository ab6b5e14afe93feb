"""Connections one client can hold open: a per-address cap and a deadline for each request's headers.

uvicorn keeps a connection that sends nothing for as long as the client likes, and once
``limit_concurrency`` connections are open it answers every request, ``/health`` included,
with 503. Sockets cost an attacker nothing, so a few hundred idle ones took a server down.
Here, per worker process:

* a connection must send each request's headers within ``header_timeout`` seconds (counted
  from the connection's start, then from the first byte after the previous response), or it
  is closed: uvicorn's keep-alive timer stops at that byte, so a client that trickled the
  next request would hold the connection forever (a WebSocket, once upgraded, is a session
  with its own idle limits);
* one client address may hold at most ``max_connections_per_address`` open connections;
  past that, :data:`PROBE_ROOM` more are let in for the probes only (anything else gets 503),
  and the next ones get a short 503 and are closed before anything is read;
* past the worker's connection limit, requests get 503, except the probes ``/health`` and
  ``/ready``, which always answer.

The protocol classes below are uvicorn's own (``auto``), with these checks added at
connection time and between requests: nothing runs per WebSocket frame beyond one path test.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

from uvicorn.protocols.http.auto import AutoHTTPProtocol
from uvicorn.protocols.http.flow_control import service_unavailable
from uvicorn.protocols.websockets.auto import AutoWebSocketsProtocol

from openenv_runtime.server.ws.inline_frames import InlineFrames, supports

logger = logging.getLogger("openenv_runtime.server")

PROBES = frozenset({"/health", "/ready"})
"""Paths answered whatever the number of open connections."""
PROBE_ROOM = 8
"""Connections past an address's cap still let in, for the probes only."""

_REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)
_REFUSAL_BODY = (
    b'{"detail":"Too many open connections from your address; close some and retry.",'
    b'"code":"TOO_MANY_CONNECTIONS"}'
)


class ConnectionGuard:
    """The open connections of one worker, by client address."""

    def __init__(
        self, per_address: int | None, header_timeout: float | None, limit: int | None
    ) -> None:
        self.per_address = per_address
        self.header_timeout = header_timeout
        self.limit = limit
        self.by_address: dict[str, int] = {}
        self.owners: dict[Any, str] = {}  # transport -> its address
        self.refused = 0
        self.timed_out = 0
        self._gated: tuple[Any, Any, Any] | None = None

    @property
    def total(self) -> int:
        return len(self.owners)

    def admit(self, transport: Any) -> bool | None:
        """Count a new connection: True (admitted), None (admitted for the probes only: its
        address is at the cap) or False (refused, nothing counted)."""
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else "unix"
        held = self.by_address.get(address, 0)
        full = self.per_address is not None and held >= self.per_address
        if full and held >= self.per_address + PROBE_ROOM:  # type: ignore[operator]
            self.refused += 1
            if self.refused == 1 or self.refused % 1000 == 0:
                logger.warning(
                    "refused %d connection(s): a client address held %d open connections "
                    "(MAX_CONNECTIONS_PER_ADDRESS)",
                    self.refused,
                    held,
                )
            return False
        self.by_address[address] = held + 1
        self.owners[transport] = address
        return None if full else True

    def release(self, transport: Any) -> None:
        """Forget a closed connection (idempotent)."""
        address = self.owners.pop(transport, None)
        if address is None:
            return
        left = self.by_address.get(address, 1) - 1
        if left > 0:
            self.by_address[address] = left
        else:
            self.by_address.pop(address, None)

    def gate(self, app: Any, probes_only: bool = False) -> Any:
        """``app`` behind the worker's connection limit (probes always pass); with
        ``probes_only``, every other path gets 503."""
        if self._gated is None or self._gated[0] is not app:
            self._gated = (app, self._limited(app, False), self._limited(app, True))
        return self._gated[2] if probes_only else self._gated[1]

    def _limited(self, app: Any, probes_only: bool) -> Any:
        guard = self

        async def gated(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["path"] not in PROBES:
                limit = guard.limit
                if probes_only or (limit is not None and len(guard.owners) >= limit):
                    await service_unavailable(scope, receive, send)
                    return
            await app(scope, receive, send)

        return gated


_guard: ConnectionGuard | None = None


def current() -> ConnectionGuard:
    """This process's default guard, made from the resolved settings on first use (the
    protocols of ``--reload`` use it; ``serve`` binds one per server with :func:`protocols`)."""
    global _guard
    if _guard is None:
        from openenv_runtime.server.config.settings import load_settings

        _guard = for_settings(load_settings().values)
    return _guard


def for_settings(settings: Any) -> ConnectionGuard:
    """A guard with the limits of ``settings`` (a ``ServerSettings``)."""
    return ConnectionGuard(
        settings.connections_per_address, settings.header_timeout, settings.connection_limit
    )


class GuardedHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
    """uvicorn's HTTP protocol with the per-address cap, the header deadline and the probe gate."""

    guard: ClassVar[ConnectionGuard | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._guard = type(self).guard or current()
        self._admitted = False
        self._deadline: asyncio.TimerHandle | None = None
        self._between = False  # a response ended and the next request has sent nothing yet
        self.limit_concurrency = None  # the gate applies the limit, sparing the probes

    def connection_made(self, transport: Any) -> None:
        guard = self._guard
        admitted = guard.admit(transport)
        if admitted is False:
            transport.write(_REFUSAL % (len(_REFUSAL_BODY), _REFUSAL_BODY))
            transport.close()
            return
        self._admitted = True
        self.app = guard.gate(self.app, probes_only=admitted is None)  # type: ignore[has-type]
        super().connection_made(transport)
        self._await_headers()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # Between requests the keep-alive timeout applies (it may rightly be longer, behind a
        # load balancer); the next request's first byte starts its header deadline.
        self._between = not self.transport.is_closing()

    def data_received(self, data: bytes) -> None:
        if self._between:
            self._between = False
            self._await_headers()
        super().data_received(data)

    def _await_headers(self) -> None:
        """(Re)start the deadline for the next request's headers."""
        timeout = self._guard.header_timeout
        if timeout is None:
            return
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = asyncio.get_running_loop().call_later(timeout, self._overdue, self.cycle)

    def _overdue(self, previous: Any) -> None:
        self._deadline = None
        transport = self.transport
        if transport is None or transport.get_protocol() is not self:  # upgraded to a WebSocket
            return
        cycle = self.cycle
        # no request's headers arrived whole since the deadline started (a pipelined request
        # still being answered is not waiting for headers)
        if cycle is previous and (cycle is None or cycle.response_complete):
            self._guard.timed_out += 1
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._admitted:
            return
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._guard.release(self.transport)
        super().connection_lost(exc)


# Frames whose reply is ready at once are answered below ASGI (see inline_frames.py) when the
# installed uvicorn's protocol is the one that shortcut is written for.
_AUTO_WS: Any = AutoWebSocketsProtocol
_WS_BASE: Any = InlineFrames if supports(_AUTO_WS) else _AUTO_WS


class GuardedWebSocketProtocol(_WS_BASE):  # type: ignore[misc]
    """uvicorn's WebSocket protocol, releasing its connection's place in the per-address count."""

    guard: ClassVar[ConnectionGuard | None] = None

    def connection_lost(self, exc: Exception | None) -> None:
        (type(self).guard or current()).release(self.transport)
        super().connection_lost(exc)


def protocols(guard: ConnectionGuard) -> tuple[type, type]:
    """The HTTP and WebSocket protocol classes of one server, bound to ``guard``."""
    http = type("GuardedHTTPProtocol", (GuardedHTTPProtocol,), {"guard": guard})
    ws = type("GuardedWebSocketProtocol", (GuardedWebSocketProtocol,), {"guard": guard})
    return http, ws
