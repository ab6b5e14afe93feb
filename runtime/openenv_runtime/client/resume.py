"""Reconnect and resume: an episode outlives its connection.

``ResumingTransport`` sits between :class:`EnvClient` and the WebSocket. It opts into the
server's resume protocol (see ``openenv_runtime.server.sessions.resume``) with a random session key,
numbers every request, and when the connection drops it reconnects with exponential backoff
(``tenacity``), presents the session id and its secret token, and sends the unanswered request
again under the same number: the server answers it once, so nothing is lost or applied twice.

When the session cannot come back (grace period over, server restarted) a request raises
``EnvError`` with code ``SESSION_GONE``, except a ``reset``, which starts a new session instead
(it discards the old state anyway): that is how a client moves to another replica after a
drain. A server without the protocol (openenv-core) gets plain requests, as before.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_chain,
    wait_exponential_jitter,
    wait_none,
)

from ..errors import EnvError
from ..protocol import CLOSE_FRAME, numbered_step_frame
from .transport import Connection, ConnectionLost

Opener = Callable[[dict[str, str]], Awaitable[Connection]]
"""Opens one connection with these extra handshake headers (``EnvClient._open_connection``)."""

HEADER_SESSION = "X-OpenEnv-Session"
HEADER_TOKEN = "X-OpenEnv-Resume-Token"
SESSION_GONE = "SESSION_GONE"
RESUME_REFUSED = "RESUME_REFUSED"
# How long a new session waits for a server that answers 503 (draining, or a balancer with no
# ready replica) before giving up.
NEW_SESSION_PATIENCE = 30.0


# The longest grace period a server may announce: what a client keeps retrying for when
# the server is gone. A hostile or broken header ("inf", "nan", "1e308", "soon") cannot make
# it retry forever or fail to connect.
MAX_GRACE = 3600.0


def _grace(raw: str | None) -> float:
    """The announced grace period in seconds, within ``[0, MAX_GRACE]`` (0 when unreadable)."""
    try:
        seconds = float(raw or 0)
    except ValueError:
        return 0.0
    if not math.isfinite(seconds):
        return MAX_GRACE if seconds > 0 else 0.0
    return min(max(seconds, 0.0), MAX_GRACE)


class _Dropped(Exception):
    """The connection is gone, the session may not be: try again."""


class ResumingTransport:
    """One session over as many connections as it takes.

    ``opener`` opens a connection to ``url`` (handshake done); ``message_timeout`` bounds the
    wait for each reply (None: no bound). ``ws`` is the connection in use.
    """

    def __init__(self, opener: Opener, url: str, message_timeout: float | None) -> None:
        self.open_connection = opener
        self.url = url
        self.message_timeout = message_timeout
        self.ws: Connection | None = None
        self.session_id: str | None = None
        self._token: str | None = None
        self.grace = 0.0
        self.seq = 0
        self.resumable = False
        self.resumes = 0  # successful re-attachments, for curious callers and benchmarks
        self.resume_seconds: list[float] = []  # drop noticed → re-attached, per resume
        self._dropped_at = 0.0
        self.ended: str | None = None  # why the session ended, until connect() starts another
        # reconnect at once, then back off: 20 ms, 40 ms, ... up to 1 s, with jitter
        self.backoff = wait_chain(
            wait_none(), wait_exponential_jitter(multiplier=0.01, max=1.0, jitter=0.01)
        )

    def __repr__(self) -> str:  # never the token
        return f"ResumingTransport(session_id={self.session_id!r}, seq={self.seq})"

    async def connect(self) -> None:
        self.ended = None
        if self.ws is None and self.session_id is None:
            await self._new_session()

    async def _new_session(self) -> None:
        key = secrets.token_urlsafe(16)

        async def attempt() -> Connection:
            try:
                return await self.open_connection({HEADER_SESSION: key})
            except EnvError as exc:
                if exc.code == "CAPACITY_REACHED":
                    raise  # full: said at once, like the message after the upgrade
                if exc.details.get("status") == 503 or exc.details.get("dropped"):
                    raise _Dropped from None  # draining, no ready replica yet, or a cut handshake
                raise

        try:
            ws = await self._retry(attempt, NEW_SESSION_PATIENCE)
        except _Dropped:
            raise EnvError(
                "CONNECTION_ERROR",
                f"{self.url} took no new session (HTTP 503 or broken handshakes) "
                f"in {NEW_SESSION_PATIENCE:g}s of retrying",
            ) from None
        headers = ws.response.headers if ws.response is not None else {}
        token = headers.get(HEADER_TOKEN)
        self.ws = ws
        self.seq = 0
        self.resumable = bool(token)
        self._token = token or None
        self.session_id = headers.get(HEADER_SESSION) if token else None
        self.grace = _grace(headers.get("X-OpenEnv-Resume-Grace")) if token else 0.0

    async def _retry(self, func: Any, patience: float) -> Any:
        async for attempt in AsyncRetrying(
            stop=stop_after_delay(patience),
            wait=self.backoff,
            retry=retry_if_exception_type(_Dropped),
            reraise=True,
        ):
            with attempt:
                return await func()
        raise AssertionError("unreachable")  # pragma: no cover

    async def _reattach(self) -> None:
        assert self.session_id is not None and self._token is not None
        try:
            ws = await self.open_connection(
                {HEADER_SESSION: self.session_id, HEADER_TOKEN: self._token}
            )
        except EnvError as exc:
            status = exc.details.get("status")
            if status == 410:
                raise EnvError(
                    SESSION_GONE,
                    f"session {self.session_id} is gone (grace period over or server "
                    "restarted); its episode state is lost: reset to start a new session",
                ) from None
            if status == 403 and exc.details.get("error") == RESUME_REFUSED:
                raise EnvError(RESUME_REFUSED, "the server refused the resume token") from None
            if status in (401, 403):
                raise
            raise _Dropped from None  # unreachable for now, draining replica, ...: try again
        self.ws = ws
        self.resumes += 1
        self.resume_seconds.append(time.monotonic() - self._dropped_at)

    def submit_numbered(self, frame: str) -> asyncio.Future[str | bytes] | None:
        """The usual request, sent at once with no coroutine: number ``frame`` and send it.

        Only while connected to a resumable session with no ``message_timeout``; otherwise
        None (use :meth:`request`). When the returned future raises ``ConnectionLost``,
        finish the request with :meth:`resend`.
        """
        conn = self.ws
        if conn is None or not self.resumable or self.message_timeout is not None:
            return None
        self.seq += 1
        return conn.submit(frame[:-1] + f',"seq":{self.seq}}}')

    def submit_step(self, action_json: str) -> asyncio.Future[str | bytes] | None:
        """:meth:`submit_numbered` of the ``step`` of ``action_json``, the frame built once."""
        conn = self.ws
        if conn is None or not self.resumable or self.message_timeout is not None:
            return None
        self.seq += 1
        return conn.submit(numbered_step_frame(action_json, self.seq))

    async def resend(self, frame: str) -> str | bytes:
        """The connection dropped under ``frame``, numbered and sent: reconnect, send it again."""
        self.ws = None
        self._dropped_at = time.monotonic()
        return await self._again(frame)

    async def request(self, frame: str) -> str | bytes:
        if self.ended is not None:
            raise EnvError("CLOSED", f"{self.ended}; open a new session with `await env.connect()`")
        if self.ws is None and self.session_id is None:
            await self._new_session()
        if not self.resumable:
            return await self._plain(frame)
        self.seq += 1
        conn = self.ws
        if conn is not None:  # the usual case: one send, one reply, no retry machinery
            try:
                return await self._recv(conn, conn.submit(frame[:-1] + f',"seq":{self.seq}}}'))
            except ConnectionLost:
                self.ws = None
                self._dropped_at = time.monotonic()
        return await self._again(frame)

    async def _again(self, frame: str) -> str | bytes:
        """Send request number ``seq`` (``frame``) again, reconnecting first, until answered."""
        is_reset = frame.startswith('{"type":"reset"')

        async def attempt() -> str | bytes:
            if self.ws is None:
                try:
                    await self._reattach()
                except EnvError as exc:
                    if exc.code != SESSION_GONE or not is_reset:
                        self._forget(exc.message)
                        raise
                    await self._new_session()  # a reset loses nothing: start over anywhere
                    if not self.resumable:
                        return await self._plain(frame)
                    self.seq = 1
            ws = self.ws
            assert ws is not None
            try:
                return await self._recv(ws, ws.submit(frame[:-1] + f',"seq":{self.seq}}}'))
            except (ConnectionLost, OSError):
                self.ws = None
                self._dropped_at = time.monotonic()
                raise _Dropped from None

        try:
            result: str | bytes = await self._retry(attempt, max(self.grace, 1.0))
        except _Dropped:
            ended = f"could not reach {self.url} again within the {self.grace:g}s grace period"
            self._forget(ended)
            raise EnvError(SESSION_GONE, ended) from None
        return result

    async def _recv(self, ws: Connection, reply: asyncio.Future[str | bytes]) -> str | bytes:
        timeout = self.message_timeout
        if timeout is None:
            return await reply
        try:
            return await asyncio.wait_for(reply, timeout)
        except (TimeoutError, asyncio.TimeoutError):
            # A late reply would be mistaken for the next one: this session cannot go on.
            self.ws = None
            ws.abort()
            ended = f"no reply from {self.url} within {timeout}s (message_timeout)"
            self._forget(ended)
            raise EnvError("TIMEOUT", ended) from None

    async def _plain(self, frame: str) -> str | bytes:
        ws = self.ws
        if ws is None:
            raise EnvError("CLOSED", "the session ended; open a new one with `await env.connect()`")
        try:
            # A server that said why before closing (e.g. CAPACITY_REACHED) answers with that.
            return await self._recv(ws, ws.submit(frame))
        except ConnectionLost as exc:
            ended = f"the connection to {self.url} ended: {exc}"
            self._forget(ended)
            raise EnvError("CLOSED", ended) from None

    def _forget(self, ended: str | None = None) -> None:
        self.ended = ended
        self.ws = None
        self.session_id = None
        self._token = None
        self.resumable = False

    async def close(self) -> None:
        """End the session for good (after a drop: one quick attempt to tell the server)."""
        ws = self.ws
        if ws is None and self.resumable:
            try:
                await self._reattach()
                ws = self.ws
            except (EnvError, _Dropped):
                ws = None
        self._forget()
        if ws is None:
            return
        ws.send(CLOSE_FRAME)
        await ws.close()
