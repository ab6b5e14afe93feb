"""Frames answered in the WebSocket protocol itself, below ASGI, when the answer is ready at once.

Through ASGI, every frame takes the same trip: the protocol puts it on a queue and stops
reading from the socket, the connection's task wakes up, takes it, starts reading again, and
hands the reply back through ``send()``. For a step whose plain ``step()`` runs inline (a few
microseconds of work, see ``step_placement.py``) that trip cost the server more than the
step: a task switch, two epoll changes and a handful of awaits per frame.

So the server's WebSocket protocol (``connections.GuardedWebSocketProtocol``, uvicorn's
sans-I/O ``websockets`` protocol underneath) lets the endpoint register a *frame handler* for
its connection: a plain function that gets a complete text message and returns its reply, or
``None`` to let the message take the ASGI trip as before. The protocol calls it only when
nothing can be overtaken:

* the connection's task waits in ``receive()`` with nothing queued for it (so no earlier
  frame is still waiting for its reply, and the reply goes out in order);
* the transport is writable (a client that does not read its replies makes the frames queue
  up again, and reading stops, as before);
* the server has not sent its close frame.

The endpoint (``websocket.py``) answers that way only a ``step`` whose ``step()`` is proven
cheap, with the same parsing, checks and reply as the ASGI loop; everything else (``reset``,
``state``, errors, a step on the thread pool) is declined and goes through ASGI unchanged. The
endpoint finds the protocol in its scope, under ``scope["extensions"][EXTENSION]``; on a server
with another protocol (wsproto, an older uvicorn) the key is absent and every frame takes the
ASGI trip.

**The frame itself.** ``websockets``' sans-I/O parser is a chain of generators: measured, it
costs ~3 µs to turn one small frame into an event, and ~1 µs to write one back, about a fifth
of what the whole server spends on a step. When the bytes of one read are exactly one whole,
final, masked text frame of the simplest form (no extension bits, a length under 64 KiB within
the size limit) and ``websockets``' parser sits between frames with nothing buffered, the frame
is unmasked here and its reply framed here (:func:`text_frame`, :func:`frame_header`); any other
read, any frame the handler declines, and a payload that is not UTF-8 go to ``websockets``
untouched, which then parses them exactly as before (close codes 1002, 1007 and 1009 included).

**Sharing the loop.** uvicorn stops reading a connection while a message waits for its task,
and that bounds what one client costs the loop. Answered here, nothing waits: uvloop read a
pipelining client's socket again and again in one turn (each read filling its 256 kB buffer,
up to 32 times) and every frame was answered meanwhile, seconds of work while every other
connection (``/health`` too) waited. So at most :data:`TURN_BYTES` of one connection are parsed
and answered per turn: the rest of a larger read is kept, reading stops, and the next part is
taken on the loop's next turn, after the other connections had theirs. And while the
transport's write buffer is over its high-water mark (a client that does not read), reading
stops until it drains: pongs to its pings obey the same backpressure as replies.

**Where it applies.** The shortcut reads private parts of uvicorn's protocol, of ``websockets``'
parser and of asyncio's queue. :data:`TESTED` names the versions it is tested with; with any
other, :func:`supports` says no (one log line) and the server uses uvicorn's own protocol, every
frame through ASGI. ``OPENENV_INLINE_FRAMES=0`` (``inline_frames`` in the server settings)
keeps this protocol but never gives it a frame handler.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from time import monotonic
from typing import Any

from websockets.exceptions import InvalidState
from websockets.protocol import OPEN, Protocol, Side
from websockets.streams import StreamReader

try:  # uvicorn 0.35 and later
    from uvicorn.protocols.websockets.websockets_sansio_impl import (
        WebSocketsSansIOProtocol as _SansIO,
    )
except ImportError:  # pragma: no cover - an older uvicorn: every frame takes the ASGI trip
    _SansIO = None  # type: ignore[assignment, misc]

try:  # websockets' C unmasking, as its own parser uses it
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover - a build without the extension
    from websockets.utils import apply_mask

logger = logging.getLogger("openenv_runtime.server")

TESTED: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "uvicorn": ((0, 53), (0, 54)),
    "websockets": ((15, 0), (17, 4)),
}
"""The versions (major, minor; first and last, inclusive) the shortcut is tested with: its
tests passed with uvicorn 0.53 and 0.54, websockets 15.0, 16.0 and 17.4 (uvicorn 0.50 to 0.52
failed two: a client that does not read was still read from)."""

TURN_BYTES = 32 << 10
"""Bytes of one connection parsed (and answered) in one turn of the loop, at most."""

UTF8_LOG_INTERVAL = 60.0
"""Seconds between two log lines about text messages that are not UTF-8."""

EXTENSION = "openenv.inline_frames"
"""The scope extension under which the protocol offers itself to the endpoint."""

FrameHandler = Callable[[str], "str | None"]
"""A complete text message → its reply, or ``None`` to send the message through ASGI."""

# What the protocol below overrides of uvicorn's.
_REQUIRED = (
    "send_receive_event_to_app",
    "handle_connect",
    "data_received",
    "pause_writing",
    "resume_writing",
    "handle_parser_exception",
)

# websockets 16 renamed two attributes the shortcut reads (cur_size, max_size before).
_PROBE = Protocol(Side.SERVER)
_CURRENT_SIZE = "current_size" if hasattr(_PROBE, "current_size") else "cur_size"
_SIZE_LIMIT = "max_message_size" if hasattr(_PROBE, "max_message_size") else "max_size"
del _PROBE

# Where websockets' parser waits between two frames: Protocol.parse, in StreamReader.at_eof.
_FRAME_LOOP = getattr(Protocol.parse, "__code__", None)
_BETWEEN_FRAMES = getattr(StreamReader.at_eof, "__code__", None)

_FIN_TEXT = 0x81  # FIN set, no extension bits, opcode 1 (text)


def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or ``None``."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def untested_versions() -> list[str]:
    """``name version`` of each installed package outside :data:`TESTED` (empty: all tested)."""
    untested = []
    for name, (first, last) in TESTED.items():
        found = installed_version(name)
        try:
            major, minor = (int(part) for part in (found or "").split(".")[:2])
        except ValueError:
            untested.append(f"{name} {found}")
            continue
        if not first <= (major, minor) <= last:
            untested.append(f"{name} {found}")
    return untested


def supports(protocol_cls: Any) -> bool:
    """Whether ``protocol_cls`` is uvicorn's sans-I/O WebSocket protocol, with what we use of it
    and of asyncio's queue, in a version the shortcut is tested with (else one log line says
    why the server answers every frame through ASGI)."""
    if _SansIO is None or protocol_cls is not _SansIO:
        return False
    untested = untested_versions()
    if untested:
        logger.warning(
            "WebSocket frames all go through ASGI: the inline frame path is tested with %s, "
            "not with %s",
            ", ".join(f"{n} {a[0]}.{a[1]}-{b[0]}.{b[1]}" for n, (a, b) in TESTED.items()),
            ", ".join(untested),
        )
        return False
    queue = asyncio.Queue[Any]()
    return all(callable(getattr(protocol_cls, name, None)) for name in _REQUIRED) and hasattr(
        queue, "_getters"
    )


def offer_frame_handler(
    scope: dict[str, Any], enabled: bool, make_handler: Callable[[], FrameHandler]
) -> InlineFrames | None:
    """The switch: the connection's protocol, given the handler ``make_handler`` builds, when
    ``enabled`` (the ``inline_frames`` setting, and the session's steps may run inline) and the
    protocol is this module's (the server's uvicorn and websockets passed :func:`supports`);
    ``None`` otherwise, and every frame takes the ASGI trip."""
    if not enabled:
        return None
    protocol: InlineFrames | None = (scope.get("extensions") or {}).get(EXTENSION)
    if protocol is not None:
        protocol.frame_handler = make_handler()
    return protocol


class _Utf8Refusals:
    """Connections closed (1007) for a text message that is not UTF-8: one log line at most
    every :data:`UTF8_LOG_INTERVAL` seconds, with the count since the last."""

    def __init__(self) -> None:
        self.unlogged = 0
        self.logged_at: float | None = None

    def count(self, client: Any) -> None:
        self.unlogged += 1
        now = monotonic()
        if self.logged_at is not None and now - self.logged_at < UTF8_LOG_INTERVAL:
            return
        where = f"{client[0]}:{client[1]}" if isinstance(client, tuple) else "a client"
        logger.warning(
            "closed %d WebSocket connection(s) with 1007: a text message was not UTF-8 "
            "(latest from %s)",
            self.unlogged,
            where,
        )
        self.unlogged, self.logged_at = 0, now


utf8_refusals = _Utf8Refusals()


def text_frame(data: bytes, max_size: int | None) -> bytes | None:
    """The unmasked payload when ``data`` is exactly one final, masked text frame without
    extension bits, shorter than 64 KiB and within ``max_size``; ``None`` for anything else."""
    size = len(data)
    if size < 6 or data[0] != _FIN_TEXT:
        return None
    length = data[1] ^ 0x80  # the mask bit must be set: a client frame without it is an error
    if length < 126:
        start = 6
    elif length == 126 and size >= 8:
        length = (data[2] << 8) | data[3]
        start = 8
    else:
        return None  # unmasked (>= 128 after the flip), or a 64-bit length
    if size != start + length or (max_size is not None and length > max_size):
        return None
    return apply_mask(data[start:], data[start - 4 : start])


def frame_header(length: int) -> bytes:
    """The header of an unmasked final text frame of ``length`` bytes (server to client)."""
    if length < 126:
        return bytes((_FIN_TEXT, length))
    if length < 65536:
        return bytes((_FIN_TEXT, 126, length >> 8, length & 0xFF))
    return bytes((_FIN_TEXT, 127)) + length.to_bytes(8, "big")


def between_frames(conn: Any) -> bool:
    """Whether ``websockets``' parser of ``conn`` waits for a new frame with nothing buffered
    (so bytes it never sees leave it exactly where it was)."""
    if conn.reader.buffer or getattr(conn, _CURRENT_SIZE) is not None:
        return False
    outer, inner = None, conn.parser
    while True:
        deeper = getattr(inner, "gi_yieldfrom", None)
        if deeper is None:
            break
        outer, inner = inner, deeper
    return (
        outer is not None
        and outer.gi_code is _FRAME_LOOP
        and getattr(inner, "gi_code", None) is _BETWEEN_FRAMES
    )


class InlineFrames(_SansIO if _SansIO is not None else object):  # type: ignore[misc]
    """uvicorn's sans-I/O WebSocket protocol with a frame handler, called when nothing can be
    overtaken. Without a handler, every frame goes through ASGI as in uvicorn's protocol."""

    _handler: FrameHandler | None = None
    _between = False  # websockets' parser is known to wait for a new frame, nothing buffered
    _pending: bytes | None = None  # read, not parsed yet: parsed on the loop's next turns
    _yielding = False  # the next turn's _next_turn is scheduled
    inline_replies = 0  # messages answered here (tests and benchmarks read it)
    raw_replies = 0  # of which the frame was also read and written here

    # uvicorn's state (declared for the type checker; set by the protocol's __init__)
    frames: list[bytes]
    curr_msg_data_type: str
    queue: Any
    conn: Any
    writable: Any
    close_sent: bool
    read_paused: bool
    transport: Any
    loop: Any
    client: Any

    @property
    def frame_handler(self) -> FrameHandler | None:
        """Set by the endpoint while its session can answer frames here; ``None`` otherwise."""
        return self._handler

    @frame_handler.setter
    def frame_handler(self, handler: FrameHandler | None) -> None:
        self._handler = handler
        # Only a connection with a handler pays for the check on messages websockets parsed.
        if handler is None:
            self.__dict__.pop("send_receive_event_to_app", None)
        else:
            self.__dict__["send_receive_event_to_app"] = self._answer_or_queue

    def handle_connect(self, event: Any) -> None:
        _SansIO.handle_connect(self, event)
        # The scope exists when the handshake goes on to the app, whose task has not run yet.
        # (Not in an overridden run_asgi(): one more coroutine in the task's stack costs every
        # frame through ASGI at each resume.)
        scope = self.__dict__.get("scope")
        if scope is not None:
            scope["extensions"][EXTENSION] = self

    def _may_answer(self) -> bool:
        # The connection's task waits in receive() for a frame, with none queued. asyncio's
        # Queue has no public way to ask whether a get() waits: its waiting get()'s future sits
        # in _getters until a put wakes it. The public way, a Queue whose get() counts its
        # waiting callers, costs every frame through ASGI +0.4 to +0.6 µs (a coroutine more
        # per get(); benchmarks/server/queue_watch.py, queue_watch_latest.md), so the private
        # read stays, checked by supports() and fenced by TESTED.
        queue = self.queue
        return (
            bool(queue._getters)
            and queue.empty()
            and not self.close_sent
            and self.writable.is_set()
        )

    def data_received(self, data: bytes) -> None:
        if self._pending is not None or len(data) > TURN_BYTES:
            self._defer(data)
            return
        # uvloop keeps this bound method from the start: it cannot be swapped per connection,
        # so the way through for a connection without a handler is kept short.
        handler = self._handler
        if handler is None or not self._may_answer():
            self._between = False
            _SansIO.data_received(self, data)
            if not self.writable.is_set():  # uvicorn's receive() may have resumed reading
                self.transport.pause_reading()
            return
        conn = self.conn
        if (
            conn.state is OPEN
            and not conn.extensions
            and not conn.debug
            and not conn.writes
            and not conn.expect_continuation_frame
            and (self._between or between_frames(conn))
        ):
            self._between = True
            payload = text_frame(data, getattr(conn, _SIZE_LIMIT))
            if payload is not None:
                body = self._reply_to(handler, payload)
                if body is not None:
                    self.transport.write(frame_header(len(body)) + body)
                    self.raw_replies += 1
                    return
                # declined (or not UTF-8): the same frame goes through ASGI without asking again
                self._between = False
                self.__dict__.pop("send_receive_event_to_app", None)
                try:
                    _SansIO.data_received(self, data)
                finally:
                    if self._handler is not None:
                        self.__dict__["send_receive_event_to_app"] = self._answer_or_queue
                return
        self._between = False
        _SansIO.data_received(self, data)
        if not self.writable.is_set():
            self.transport.pause_reading()

    def _defer(self, data: bytes) -> None:
        """Keep ``data`` for a later turn, after the bytes kept before it; stop reading meanwhile."""
        pending = self._pending
        self._pending = data if pending is None else pending + data
        self.transport.pause_reading()
        if not self._yielding:
            self._yielding = True
            self.loop.call_soon(self._next_turn)

    def _next_turn(self) -> None:
        """The loop's next turn: the next :data:`TURN_BYTES` kept, or reading again."""
        self._yielding = False
        pending = self._pending
        if pending is None:
            self._read_if_free()
            return
        self._pending = None
        if self.transport.is_closing():
            return
        self.data_received(pending[:TURN_BYTES])
        if len(pending) > TURN_BYTES:
            self._defer(pending[TURN_BYTES:])
        else:
            self._read_if_free()

    def _read_if_free(self) -> None:
        # Nothing else holds reading: bytes kept for a later turn, uvicorn's queue
        # (read_paused), the write buffer.
        if (
            self._pending is None
            and not self._yielding
            and not self.read_paused
            and self.writable.is_set()
            and not self.transport.is_closing()
        ):
            self.transport.resume_reading()

    def pause_writing(self) -> None:
        _SansIO.pause_writing(self)
        # A client that does not read gets nothing more read from it either (pongs included)
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        _SansIO.resume_writing(self)
        self._read_if_free()

    def send_receive_event_to_app(self) -> None:
        """uvicorn's, with a text message that is not UTF-8 refused (close 1007) with one
        rate-limited log line instead of a traceback each."""
        if self.curr_msg_data_type == "text" and not self.close_sent:
            frames = self.frames
            data = frames[0] if len(frames) == 1 else b"".join(frames)
            if not data.isascii():
                try:
                    data.decode()
                except UnicodeDecodeError:
                    self.frames = []
                    utf8_refusals.count(self.client)
                    self.conn.send_close(1007)
                    self.handle_parser_exception()
                    return
        _SansIO.send_receive_event_to_app(self)

    def _reply_to(self, handler: FrameHandler, payload: bytes) -> bytes | None:
        """The handler's reply to a text message, encoded; ``None`` when it declines or the
        payload is not UTF-8 (the ASGI path then closes the connection with 1007, as before)."""
        try:
            text = payload.decode()
        except UnicodeDecodeError:
            return None
        reply = handler(text)
        if reply is None:
            return None
        self.inline_replies += 1
        return reply.encode()

    def _answer_or_queue(self) -> None:
        """``send_receive_event_to_app`` of a connection with a handler: a whole text message
        websockets parsed (cut across reads, in fragments, or sharing a read) is answered here
        when it can be, else queued for the app as uvicorn does."""
        handler = self._handler
        if handler is not None and self.curr_msg_data_type == "text" and self._may_answer():
            frames = self.frames
            body = self._reply_to(handler, frames[0] if len(frames) == 1 else b"".join(frames))
            if body is not None:
                self.frames = []
                try:
                    self.conn.send_text(body)
                except InvalidState:
                    return  # the client's close frame arrived first: nobody to answer
                self.transport.write(b"".join(self.conn.data_to_send()))
                return
        InlineFrames.send_receive_event_to_app(self)
