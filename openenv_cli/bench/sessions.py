"""What one simulated client does: the coroutines the load generator runs by the thousand.

Two transports: ``ws`` (one WebSocket connection per session, see ``wsclient``) and
``http`` (a minimal keep-alive HTTP/1.1 client on asyncio streams, ``POST /reset`` then
``/step`` and ``/close`` naming the session). No pydantic and no full JSON parse on the
hot path: a reply that starts like an observation is one; anything else is parsed to
find out what went wrong.

Every operation is bounded by ``Target.timeout`` (a step by ``timeout + wait``).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any
from urllib.parse import urlsplit

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from .wsclient import CLIENTS, ConnectionLost, open_connection

RESET_FRAME = '{"type":"reset","data":{}}'
_OBSERVATION_PREFIXES = ('{"type":"observation"', '{"type": "observation"')
_MAX_SAMPLES = 5


@dataclass(frozen=True, slots=True)
class Target:
    """Where the load goes and how: built from ``--url`` (only that host and port get traffic)."""

    host: str
    port: int
    base_path: str = ""
    transport: str = "ws"
    timeout: float = 30.0
    compression: bool = True
    client: str = "lean"

    @classmethod
    def parse(
        cls,
        url: str,
        *,
        transport: str = "ws",
        timeout: float = 30.0,
        compression: bool = True,
        client: str = "lean",
    ) -> Target:
        """``http://host:port[/prefix]`` or ``ws://host:port[/prefix][/ws]``; raises ``ValueError``."""
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "ws"):
            raise ValueError(
                f"--url must start with http:// or ws:// (got {url!r}); TLS is not supported by the load generator."
            )
        if not parts.hostname:
            raise ValueError(f"--url has no host: {url!r}")
        if transport not in ("ws", "http"):
            raise ValueError(f"transport must be ws or http, got {transport!r}")
        if timeout <= 0:
            raise ValueError("the timeout must be positive")
        if client not in CLIENTS:
            raise ValueError(f"client must be one of {', '.join(CLIENTS)}, got {client!r}")
        path = parts.path.rstrip("/")
        path = path.removesuffix("/ws")
        return cls(
            parts.hostname, parts.port or 80, path, transport, float(timeout), compression, client
        )

    @property
    def ws_url(self) -> str:
        return f"ws://{self._netloc}{self.base_path}/ws"

    @property
    def http_url(self) -> str:
        return f"http://{self._netloc}{self.base_path}"

    @property
    def _netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def step_frame(wait: float) -> str:
    return '{"type":"step","data":{"wait":%s}}' % repr(float(wait))


def reply_problem(reply: str | bytes) -> str | None:
    """None when ``reply`` is an observation message; else a short label of what it is."""
    if isinstance(reply, bytes):
        reply = reply.decode("utf-8", "replace")
    if reply.startswith(_OBSERVATION_PREFIXES):
        return None
    try:
        message = json.loads(reply)
    except ValueError:
        return "unparsable reply"
    if isinstance(message, dict):
        if message.get("type") == "observation":
            return None
        if message.get("type") == "error":
            data = message.get("data") if isinstance(message.get("data"), dict) else {}
            return f"error {data.get('code', '?')}"
    return "unexpected reply"


def describe_failure(exc: BaseException) -> str:
    """A short, countable label for an exception (no addresses or ids in it)."""
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, InvalidStatus):
        return f"HTTP {exc.response.status_code}"
    if isinstance(exc, ConnectionLost):
        return "connection lost"
    if isinstance(exc, ConnectionClosed):
        code = exc.rcvd.code if exc.rcvd is not None else None
        return f"connection closed ({code})" if code is not None else "connection lost"
    if isinstance(exc, InvalidHandshake):
        return "bad handshake"
    if isinstance(exc, OSError):
        return type(exc).__name__ if type(exc) is not OSError else f"OSError {exc.errno}"
    return type(exc).__name__


@dataclass
class Collector:
    """What the sessions of one worker process observed (columns of seconds)."""

    attempted: int = 0
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)
    connect: list[float] = field(default_factory=list)
    reset: list[float] = field(default_factory=list)
    step: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    step_latencies: list[float] = field(default_factory=list)
    steps: int = 0
    window: list[float] = field(
        default_factory=list
    )  # [first step start, last step end] (monotonic)

    def fail(self, phase: str, what: str, detail: object = None) -> None:
        label = f"{phase}: {what}"
        self.errors[label] += 1
        if len(self.samples) < _MAX_SAMPLES:
            self.samples.append(f"{label}: {detail}" if detail else label)

    def mark_window(self, start: float, end: float) -> None:
        if not self.window:
            self.window = [start, end]
        else:
            self.window[0] = min(self.window[0], start)
            self.window[1] = max(self.window[1], end)

    def as_dict(self) -> dict[str, Any]:
        return {
            "attempted": self.attempted,
            "ok": self.ok,
            "errors": dict(self.errors),
            "samples": self.samples,
            "connect": self.connect,
            "reset": self.reset,
            "step": self.step,
            "total": self.total,
            "step_latencies": self.step_latencies,
            "steps": self.steps,
            "window": self.window,
        }


# --- WebSocket ------------------------------------------------------------------------------


async def ws_open(target: Target) -> Any:
    async with asyncio.timeout(target.timeout):
        return await open_connection(
            target.ws_url, client=target.client, compression=target.compression
        )


async def ws_request(ws: Any, frame: str, timeout: float) -> str | bytes:
    async with asyncio.timeout(timeout):
        return await ws.request(frame)


def _abort(ws: Any) -> None:
    if ws is not None:
        ws.abort()


def _detail(exc: BaseException) -> object:
    return None if isinstance(exc, TimeoutError) else exc


async def ws_session(target: Target, wait: float, col: Collector) -> None:
    """The scaling-study session: connect, reset, one step with ``wait``, close."""
    col.attempted += 1
    phase, ws = "connect", None
    start = perf_counter()
    try:
        ws = await ws_open(target)
        t_open = perf_counter()
        col.connect.append(t_open - start)
        phase = "reset"
        problem = reply_problem(await ws_request(ws, RESET_FRAME, target.timeout))
        if problem:
            col.fail(phase, problem)
            _abort(ws)
            return
        t_reset = perf_counter()
        col.reset.append(t_reset - t_open)
        phase = "step"
        problem = reply_problem(await ws_request(ws, step_frame(wait), target.timeout + wait))
        if problem:
            col.fail(phase, problem)
            _abort(ws)
            return
        col.step.append(perf_counter() - t_reset)
        phase = "close"
        async with asyncio.timeout(target.timeout):
            await ws.finish()
        col.total.append(perf_counter() - start)
        col.ok += 1
    except Exception as exc:  # every failure is a data point, never a crash of the run
        col.fail(phase, describe_failure(exc), _detail(exc))
        _abort(ws)


async def ws_open_and_reset(target: Target, col: Collector) -> Any:
    """Connect and reset (for throughput and idle sessions); None (and a recorded failure) on error."""
    phase, ws = "connect", None
    try:
        ws = await ws_open(target)
        phase = "reset"
        problem = reply_problem(await ws_request(ws, RESET_FRAME, target.timeout))
        if problem:
            col.fail(phase, problem)
            _abort(ws)
            return None
        return ws
    except Exception as exc:
        col.fail(phase, describe_failure(exc), _detail(exc))
        _abort(ws)
        return None


async def ws_close(ws: Any, target: Target, col: Collector) -> None:
    try:
        async with asyncio.timeout(target.timeout):
            await ws.finish()
    except Exception as exc:
        col.fail("close", describe_failure(exc))
        _abort(ws)


class Guard:
    """The deadline of one session's current operation, enforced by a :class:`Watchdog`."""

    __slots__ = ("abort", "deadline", "expired")

    def __init__(self, abort: Any) -> None:
        self.deadline = 0.0  # 0: no operation running
        self.expired = False
        self.abort = abort


class Watchdog:
    """Aborts the connection of any session whose operation outlives its deadline.

    Back-to-back steps would otherwise arm and cancel a timer per step; one task that
    looks at every guard a few times a second bounds them all for a fraction of the cost.
    A step is then bounded by its timeout plus at most one ``interval``.
    """

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.guards: set[Guard] = set()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> Watchdog:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            now = perf_counter()
            for guard in list(self.guards):
                if guard.deadline and now > guard.deadline:
                    guard.expired, guard.deadline = True, 0.0
                    guard.abort()


async def ws_steps(
    ws: Any,
    target: Target,
    steps: int,
    wait: float,
    col: Collector,
    stop_at: float,
    watchdog: Watchdog,
) -> bool:
    """``steps`` back-to-back steps; latencies into ``col``. False when the session broke.

    ``stop_at`` is on the monotonic clock, as ``perf_counter`` is on Linux.
    """
    frame = step_frame(wait)
    timeout = target.timeout + wait
    latencies = col.step_latencies
    guard = Guard(lambda: _abort(ws))
    watchdog.guards.add(guard)
    first = perf_counter()
    last = first
    done = 0
    ok = True
    try:
        for _ in range(steps):
            if last >= stop_at:
                col.fail("step", "deadline reached")
                break
            begin = perf_counter()
            guard.deadline = begin + timeout
            reply = await ws.request(frame)
            last = perf_counter()
            guard.deadline = 0.0
            if not (isinstance(reply, str) and reply.startswith(_OBSERVATION_PREFIXES)):
                problem = reply_problem(reply)
                if problem:
                    col.fail("step", problem)
                    ok = False
                    break
            latencies.append(last - begin)
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


# --- HTTP -----------------------------------------------------------------------------------


class HttpConnection:
    """One keep-alive HTTP/1.1 connection that sends JSON and reads (status, body)."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str
    ) -> None:
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def open(cls, target: Target) -> HttpConnection:
        reader, writer = await asyncio.open_connection(target.host, target.port)
        return cls(reader, writer, f"{target.host}:{target.port}")

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nUser-Agent: openenv-bench\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode("latin-1") + b"\r\n" + (body or b""))
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {
            k.strip().lower(): v.strip()
            for k, _, v in (line.partition(":") for line in lines[1:] if line)
        }
        if "content-length" in headers:
            return status, await self.reader.readexactly(int(headers["content-length"]))
        if headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    return status, b"".join(chunks)
                chunks.append(chunk[:-2])
        return status, b""

    def close(self) -> None:
        self.writer.transport.abort() if self.writer.transport is not None else None


def _session_id(body: bytes) -> str | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data.get("session_id") if isinstance(data, dict) else None


def _http_problem(status: int, body: bytes) -> str | None:
    if status == 200:
        return None
    try:
        code = json.loads(body).get("code")
    except (ValueError, AttributeError):
        code = None
    return f"HTTP {status}" + (f" {code}" if code else "")


def http_step_body(wait: float, session_id: str | None) -> bytes:
    sid = f',"session_id":{json.dumps(session_id)}' if session_id else ""
    return ('{"action":{"wait":%s}%s}' % (repr(float(wait)), sid)).encode()


async def http_open_and_reset(
    target: Target, col: Collector
) -> tuple[HttpConnection, str | None] | None:
    phase, conn = "connect", None
    try:
        async with asyncio.timeout(target.timeout):
            conn = await HttpConnection.open(target)
        phase = "reset"
        async with asyncio.timeout(target.timeout):
            status, body = await conn.request("POST", f"{target.base_path}/reset", b"{}")
        problem = _http_problem(status, body)
        if problem:
            col.fail(phase, problem)
            conn.close()
            return None
        return conn, _session_id(body)
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
                body = ('{"session_id":%s}' % json.dumps(session_id)).encode()
                status, reply = await conn.request("POST", f"{target.base_path}/close", body)
            problem = _http_problem(status, reply)
            if problem:
                col.fail("close", problem)
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
        async with asyncio.timeout(target.timeout):
            status, body = await conn.request("POST", f"{target.base_path}/reset", b"{}")
        problem = _http_problem(status, body)
        if problem:
            col.fail(phase, problem)
            return
        session_id = _session_id(body)
        t_reset = perf_counter()
        col.reset.append(t_reset - t_open)
        phase = "step"
        async with asyncio.timeout(target.timeout + wait):
            status, body = await conn.request(
                "POST", f"{target.base_path}/step", http_step_body(wait, session_id)
            )
        problem = _http_problem(status, body)
        if problem:
            col.fail(phase, problem)
            return
        col.step.append(perf_counter() - t_reset)
        if await http_close(conn, session_id, target, col):
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
    body = http_step_body(wait, session_id)
    path = f"{target.base_path}/step"
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
            status, reply = await conn.request("POST", path, body)
            last = perf_counter()
            guard.deadline = 0.0
            problem = _http_problem(status, reply)
            if problem:
                col.fail("step", problem)
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
