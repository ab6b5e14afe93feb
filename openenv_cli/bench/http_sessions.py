"""The ``http`` transport of the load generator: ``POST /reset``, ``/step``, ``/close``.

One keep-alive HTTP/1.1 connection per session, framed by ``h11`` (the sans-I/O HTTP/1.1
state machine uvicorn itself is built on) over asyncio streams: ``h11`` handles status
lines, headers, content length, chunked bodies and keep-alive; this module only moves
bytes and times them. Every operation is bounded by ``Target.timeout`` (a step by
``timeout + wait``).
"""

from __future__ import annotations

import asyncio
import json
from time import perf_counter

import h11

from openenv_cli.bench.outcomes import Collector, describe_failure, excerpt
from openenv_cli.bench.target import Target, action_text

from .auth import auth_headers
from .sessions import Guard, Watchdog
from .wsclient import USER_AGENT

_READ_SIZE = 65536
_END = h11.EndOfMessage()
Prepared = tuple[h11.Request, h11.Data]


class HttpConnection:
    """One keep-alive HTTP/1.1 connection that sends JSON and reads (status, body)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        host: str,
        token: str | None = None,
    ) -> None:
        self.reader, self.writer = reader, writer
        self.http = h11.Connection(h11.CLIENT)
        self.headers = [("Host", host), ("User-Agent", USER_AGENT)]
        self.headers.extend(auth_headers(token).items())

    @classmethod
    async def open(cls, target: Target) -> HttpConnection:
        reader, writer = await asyncio.open_connection(target.host, target.port)
        return cls(reader, writer, f"{target.host}:{target.port}", target.token)

    def prepare(self, method: str, path: str, body: bytes) -> Prepared:
        """The h11 events of one request with a JSON body, built (and validated) once.

        h11 never changes an event it sends, so back-to-back steps reuse theirs: building
        and validating the headers is a third of h11's cost per request.
        """
        headers = [
            *self.headers,
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
        ]
        return h11.Request(method=method, target=path, headers=headers), h11.Data(data=body)

    async def request(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        """Send one request with a JSON body; returns the status and the whole body."""
        return await self.send(self.prepare(method, path, body))

    async def send(self, prepared: Prepared) -> tuple[int, bytes]:
        """Send a prepared request; returns the status and the whole body."""
        http = self.http
        if http.our_state is h11.DONE:
            http.start_next_cycle()  # raises h11.LocalProtocolError when the server closes
        request, data = prepared
        self.writer.write(http.send(request) + http.send(data) + http.send(_END))
        status = 0
        chunks: list[bytes] = []
        while True:
            event = http.next_event()
            if event is h11.NEED_DATA:
                http.receive_data(await self.reader.read(_READ_SIZE))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return status, b"".join(chunks)
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionResetError("the server closed the connection")

    def close(self) -> None:
        if self.writer.transport is not None:
            self.writer.transport.abort()


def _session_id(body: bytes) -> str | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    value = data.get("session_id") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _http_problem(status: int, body: bytes) -> str | None:
    if status == 200:
        return None
    try:
        code = json.loads(body).get("code")
    except (ValueError, AttributeError):
        code = None
    return f"HTTP {status}" + (f" {code}" if code else "")


def http_step_body(target: Target, wait: float, session_id: str | None) -> bytes:
    """The body of ``POST /step``: the action, and the session it belongs to."""
    sid = f',"session_id":{json.dumps(session_id)}' if session_id else ""
    return f'{{"action":{action_text(target, wait)}{sid}}}'.encode()


async def _reset(conn: HttpConnection, target: Target, col: Collector) -> tuple[bool, str | None]:
    """``POST /reset``: whether it worked, and the session id the server named (if any)."""
    async with asyncio.timeout(target.timeout):
        status, body = await conn.request("POST", f"{target.base_path}/reset", b"{}")
    problem = _http_problem(status, body)
    if problem:
        col.fail("reset", problem, excerpt(body))
        return False, None
    return True, _session_id(body)


async def http_open_and_reset(
    target: Target, col: Collector
) -> tuple[HttpConnection, str | None] | None:
    phase, conn = "connect", None
    try:
        async with asyncio.timeout(target.timeout):
            conn = await HttpConnection.open(target)
        phase = "reset"
        ok, session_id = await _reset(conn, target, col)
        if not ok:
            conn.close()
            return None
        return conn, session_id
    except Exception as exc:
        col.fail(phase, describe_failure(exc))
        if conn is not None:
            conn.close()
        return None


async def http_close(
    conn: HttpConnection, session_id: str | None, target: Target, col: Collector
) -> bool:
    try:
        if session_id:
            async with asyncio.timeout(target.timeout):
                body = f'{{"session_id":{json.dumps(session_id)}}}'.encode()
                status, reply = await conn.request("POST", f"{target.base_path}/close", body)
            problem = _http_problem(status, reply)
            if problem:
                col.fail("close", problem, excerpt(reply))
                return False
        return True
    except Exception as exc:
        col.fail("close", describe_failure(exc))
        return False
    finally:
        conn.close()


async def http_session(target: Target, wait: float, col: Collector) -> None:
    """The scaling-study session over HTTP: connect, POST /reset, /step, /close."""
    col.attempted += 1
    start = perf_counter()
    phase, conn = "connect", None
    try:
        async with asyncio.timeout(target.timeout):
            conn = await HttpConnection.open(target)
        t_open = perf_counter()
        col.connect.append(t_open - start)
        phase = "reset"
        ok, sid = await _reset(conn, target, col)
        if not ok:
            return
        t_reset = perf_counter()
        col.reset.append(t_reset - t_open)
        phase = "step"
        async with asyncio.timeout(target.timeout + wait):
            status, body = await conn.request(
                "POST", f"{target.base_path}/step", http_step_body(target, wait, sid)
            )
        problem = _http_problem(status, body)
        if problem:
            col.fail(phase, problem, excerpt(body))
            return
        col.step.append(perf_counter() - t_reset)
        if await http_close(conn, sid, target, col):
            col.total.append(perf_counter() - start)
            col.ok += 1
        conn = None
    except Exception as exc:
        col.fail(phase, describe_failure(exc))
    finally:
        if conn is not None:
            conn.close()


async def http_steps(
    conn: HttpConnection,
    session_id: str | None,
    target: Target,
    steps: int,
    wait: float,
    col: Collector,
    stop_at: float,
    watchdog: Watchdog,
) -> bool:
    """``steps`` back-to-back ``POST /step``; latencies into ``col``. False when one failed."""
    prepared = conn.prepare(
        "POST", f"{target.base_path}/step", http_step_body(target, wait, session_id)
    )
    timeout = target.timeout + wait
    guard = Guard(conn.close)
    watchdog.guards.add(guard)
    first = last = perf_counter()
    done = 0
    ok = True
    try:
        for _ in range(steps):
            if last >= stop_at:
                col.fail("step", "deadline reached")
                break
            begin = perf_counter()
            guard.deadline = begin + timeout
            status, reply = await conn.send(prepared)
            last = perf_counter()
            guard.deadline = 0.0
            problem = _http_problem(status, reply)
            if problem:
                col.fail("step", problem, excerpt(reply))
                ok = False
                break
            col.step_latencies.append(last - begin)
            done += 1
    except Exception as exc:
        col.fail("step", "timeout" if guard.expired else describe_failure(exc))
        ok = False
    finally:
        watchdog.guards.discard(guard)
    col.steps += done
    if done:
        col.mark_window(first, last)
    return ok
