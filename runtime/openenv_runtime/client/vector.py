"""The client of a vector session: N environment instances of one server over one WebSocket.

A batch of N resets or steps is one message and one reply (the protocol is described in
:mod:`openenv_runtime.server.ws.vector`). :func:`supports_vectors` tells from a server's ``/health``
whether it offers vector sessions; a reference server does not, and a client then uses one
session per environment.

The client is blocking, on the caller's thread: a vector step is one write and one read of a
socket, with no hop to an event loop's thread and back (on a busy machine each such hop
waits for the scheduler). Several sessions (one per server) are driven at once by sending
every batch first, then reading every reply.
"""

from __future__ import annotations

import socket
import ssl
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from websockets.client import ClientProtocol
from websockets.exceptions import InvalidStatus
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.uri import parse_uri

from ..errors import EnvError
from ..http_reads import read_json
from ..protocol import CLOSE_FRAME, decode, encode
from .connect import DEFAULT_MAX_MESSAGE_BYTES, default_token, ws_url

HEADER = "X-OpenEnv-Vector"
"""The handshake header that asks for a vector session of N instances (echoed when granted)."""

READ_BYTES = 1 << 16


def supports_vectors(url: str, *, token: str | None = None, timeout: float = 30.0) -> int:
    """How many environments one vector session of the server at ``url`` may hold (0: none).

    Read from ``/health``: a server without the extension (a reference one) has no
    ``max_vector_envs`` there.
    """
    health = read_json(url, "/health", token=token or default_token(url), timeout=timeout)
    value = health.get("max_vector_envs")
    return value if type(value) is int and value > 0 else 0


Entry = dict[str, Any] | None
"""One instance's reply in a batch: the ``data`` of its observation message, or None (untouched)."""


class VectorSession:
    """``n`` environment instances of one server, reset and stepped a batch at a time.

    Open it with :meth:`open`. A batch is sent (:meth:`send_reset`, :meth:`send_step`) and its
    reply read (:meth:`receive`): one entry per instance, the ``data`` of the instance's
    observation message (``{"observation", "reward", "done"}``), or None for an instance the
    batch left alone. An instance's error raises :class:`EnvError` with its code.
    """

    def __init__(self, sock: socket.socket, protocol: ClientProtocol, n: int, url: str) -> None:
        self.sock = sock
        self.protocol = protocol
        self.n = n
        self.url = url
        self._events: deque[Frame] = deque()
        self._fragments: list[bytes] = []
        self._same_step = False

    @classmethod
    def open(
        cls,
        url: str,
        n: int,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 30.0,
        message_timeout: float | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> VectorSession | None:
        """A vector session of ``n`` instances at ``url``; None when the server opened a plain
        session instead (it does not know the extension: that session is closed again).

        Raises :class:`EnvError` (``CAPACITY_REACHED`` when the server has fewer than ``n``
        free slots, ``CONNECTION_ERROR`` otherwise) when the handshake is refused.
        """
        target = ws_url(url)
        uri = parse_uri(target)
        try:
            sock = socket.create_connection((uri.host, uri.port), timeout=connect_timeout)
        except OSError as exc:
            raise EnvError("CONNECTION_ERROR", f"cannot connect to {target}: {exc}") from None
        try:
            if uri.secure:
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=uri.host)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            protocol = ClientProtocol(uri, max_size=max_message_bytes)
            request = protocol.connect()
            token = token or default_token(url)
            if token:
                request.headers["Authorization"] = f"Bearer {token}"
            for key, value in (headers or {}).items():
                request.headers[key] = value
            request.headers[HEADER] = str(n)
            protocol.send_request(request)
            session = cls(sock, protocol, n, target)
            response = session.handshake()
            sock.settimeout(message_timeout)
        except BaseException:
            sock.close()
            raise
        if response.headers.get(HEADER) != str(n):
            session.close()
            return None
        return session

    def handshake(self) -> Response:
        """Send the opening handshake's request (:meth:`open` queues it) and read the server's
        reply; raises :class:`EnvError` when the server refuses. Called once, by :meth:`open`."""
        self._flush()
        while True:
            events = self.protocol.events_received()
            for k, event in enumerate(events):
                if isinstance(event, Response):
                    refused = self.protocol.handshake_exc
                    if isinstance(refused, InvalidStatus):
                        raise _refusal(self.url, refused.response)
                    if refused is not None:
                        raise EnvError(
                            "CONNECTION_ERROR", f"the handshake with {self.url} failed: {refused}"
                        )
                    self._events.extend(e for e in events[k + 1 :] if isinstance(e, Frame))
                    return event
            self._read()

    def _flush(self) -> None:
        for data in self.protocol.data_to_send():
            if data:
                self.sock.sendall(data)

    def _read(self) -> None:
        try:
            data = self.sock.recv(READ_BYTES)
        except TimeoutError:
            raise EnvError(
                "CONNECTION_ERROR", f"{self.url} sent no reply within the message timeout"
            ) from None
        except OSError as exc:
            raise EnvError(
                "CONNECTION_ERROR", f"the connection to {self.url} broke: {exc}"
            ) from None
        if data:
            self.protocol.receive_data(data)
        else:
            self.protocol.receive_eof()
        self._flush()  # pongs, and the answer to a close
        if not data and self.protocol.state is not State.OPEN:
            closed = self.protocol.close_rcvd
            detail = f" (code {closed.code} {closed.reason})".rstrip() if closed else ""
            raise EnvError("CONNECTION_ERROR", f"{self.url} closed the connection{detail}")

    def _text(self) -> str:
        """The next text message from the server."""
        events = self._events
        while True:
            while events:
                event = events.popleft()
                if event.opcode is Opcode.TEXT or event.opcode is Opcode.CONT:
                    self._fragments.append(bytes(event.data))
                    if event.fin:
                        text = b"".join(self._fragments).decode()
                        self._fragments = []
                        return text
                elif event.opcode is Opcode.CLOSE:
                    closed = self.protocol.close_rcvd
                    detail = f" (code {closed.code} {closed.reason})".rstrip() if closed else ""
                    raise EnvError("CONNECTION_ERROR", f"{self.url} closed the session{detail}")
            self._read()
            events.extend(e for e in self.protocol.events_received() if isinstance(e, Frame))

    def _send(self, message: dict[str, Any]) -> None:
        if self.protocol.state is not State.OPEN:
            raise EnvError("CONNECTION_ERROR", f"the vector session with {self.url} is closed")
        self.protocol.send_text(encode(message).encode())
        try:
            self._flush()
        except OSError as exc:
            raise EnvError(
                "CONNECTION_ERROR", f"the connection to {self.url} broke: {exc}"
            ) from None

    def send_reset(self, options: Sequence[dict[str, Any] | None]) -> None:
        """Reset the instances whose ``options`` are not None (``{"seed": 3}``, ``{}``)."""
        self._same_step = False
        self._send({"type": "reset", "data": {"envs": list(options)}})

    def send_step(
        self,
        actions: Sequence[Any | None],
        *,
        reset: Sequence[int] = (),
        reset_ended: bool = False,
    ) -> None:
        """Step instance i with ``actions[i]`` (None: not stepped), resetting those in ``reset``
        instead; with ``reset_ended`` an instance whose episode ends is reset at once."""
        body: dict[str, Any] = {"actions": list(actions)}
        if reset:
            body["reset"] = list(reset)
        if reset_ended:
            body["reset_ended"] = True
        self._same_step = reset_ended
        self._send({"type": "step", "data": body})

    def receive(self) -> tuple[list[Entry], list[Entry] | None]:
        """The reply to the batch sent last: its entries, and with ``reset_ended`` the fresh
        episodes' first observations."""
        reply = decode(self._text())
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, dict):
            raise EnvError("SESSION_ERROR", f"{self.url} sent a reply that is not a message")
        if reply.get("type") == "error":
            raise _error(data)
        fresh = self._entries(data, "resets") if self._same_step else None
        return self._entries(data, "results"), fresh

    def _entries(self, data: dict[str, Any], key: str) -> list[Entry]:
        raw = data.get(key)
        if not isinstance(raw, list) or len(raw) != self.n:
            raise EnvError("SESSION_ERROR", f"the vector reply's {key} is not {self.n} entries")
        entries: list[Entry] = []
        for item in raw:
            if item is None:
                entries.append(None)
                continue
            body = item.get("data") or {}
            if item.get("type") == "error":
                raise _error(body)
            entries.append(body)
        return entries

    def close(self) -> None:
        """End the session: the server closes its instances."""
        try:
            if self.protocol.state is State.OPEN:
                self.protocol.send_text(CLOSE_FRAME.encode())
                self.protocol.send_close(1000)
                self._flush()
        except OSError:
            pass
        finally:
            self.sock.close()


def _error(data: Mapping[str, Any]) -> EnvError:
    details = {k: v for k, v in data.items() if k not in ("message", "code")}
    return EnvError(
        str(data.get("code", "SESSION_ERROR")), str(data.get("message", "error")), details
    )


def _refusal(url: str, response: Response) -> EnvError:
    refused = response.headers.get("x-openenv-error")
    status = response.status_code
    body = response.body.decode(errors="replace")[:500] if response.body else ""
    try:
        said = str(decode(body)["data"]["message"])
    except (ValueError, KeyError, TypeError):
        said = ""
    if refused == "CAPACITY_REACHED":
        return EnvError(
            "CAPACITY_REACHED",
            f"{url} refused the vector session (HTTP {status}): {said or 'at capacity'}",
            {"status": status, "retry_after": response.headers.get("retry-after")},
        )
    return EnvError(
        "CONNECTION_ERROR",
        f"{url} refused the vector session with HTTP {status}" + (f": {said}" if said else ""),
        {"status": status, "error": refused},
    )
