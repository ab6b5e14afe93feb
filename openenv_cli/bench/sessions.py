"""What one simulated client does: the coroutines the load generator runs by the thousand.

Two transports: ``ws`` here (one WebSocket connection per session, see ``wsclient``) and
``http`` in ``http_sessions``. Every step sends the target's action (``Target.action``: the
environment's own example, ``--action``, or the built-in ``{"wait": ...}``). No pydantic
and no full JSON parse on the hot path: a reply that starts like an observation is one;
anything else is parsed to find out what went wrong, and kept as a sample.

Every operation is bounded by ``Target.timeout`` (a step by ``timeout + wait``).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any
from urllib.parse import urlsplit

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from .auth import auth_headers
from .wsclient import CLIENTS, ConnectionLost, HandshakeRefused, open_connection

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
    action: str = "{}"
    """The action every step sends, as JSON object text."""
    wait_field: bool = True
    """Put each run's wait into the action as ``wait`` (the built-in environment's field)."""
    token: str | None = field(default=None, repr=False)
    """The access token every handshake and request carries (see ``bench.auth``); never shown."""

    @classmethod
    def parse(
        cls,
        url: str,
        *,
        transport: str = "ws",
        timeout: float = 30.0,
        compression: bool = True,
        client: str = "lean",
        action: Mapping[str, Any] | None = None,
        wait_field: bool = True,
        token: str | None = None,
    ) -> Target:
        """``http://host:port[/prefix]`` or ``ws://host:port[/prefix][/ws]``; raises ``ValueError``."""
        parts = urlsplit(url.strip())
        if parts.username is not None or parts.password is not None or parts.query:
            raise ValueError(  # not echoed: it may hold a secret
                "--url must be a plain base URL, without user:password@ or a ?query "
                "(the access token comes from OPENENV_API_KEY and travels in a header)."
            )
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
            parts.hostname,
            parts.port or 80,
            path,
            transport,
            float(timeout),
            compression,
            client,
            _compact(dict(action or {})),
            wait_field,
            token or None,
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


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def action_text(target: Target, wait: float) -> str:
    """The JSON text of the action one step sends (with ``wait`` when the target takes it)."""
    if not target.wait_field:
        return target.action
    return _compact({**json.loads(target.action), "wait": float(wait)})


def step_frame(target: Target, wait: float) -> str:
    """The WebSocket ``step`` message."""
    return f'{{"type":"step","data":{action_text(target, wait)}}}'


def excerpt(reply: str | bytes, limit: int = 400) -> str:
    """The start of a reply, for an error sample."""
    text = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else reply
    return text if len(text) <= limit else text[:limit] + "…"


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
            data = message.get("data")
            return f"error {data.get('code', '?') if isinstance(data, dict) else '?'}"
    return "unexpected reply"


def describe_failure(exc: BaseException) -> str:
    """A short, countable label for an exception (no addresses or ids in it)."""
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, InvalidStatus):
        return f"HTTP {exc.response.status_code}"
    if isinstance(exc, HandshakeRefused):
        return f"HTTP {exc.status}"
    if isinstance(exc, ConnectionLost):
        code = exc.close_code
        return f"connection closed ({code})" if code is not None else "connection lost"
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
            target.ws_url,
            client=target.client,
            compression=target.compression,
            headers=auth_headers(target.token),
        )


async def ws_request(ws: Any, frame: str, timeout: float) -> str | bytes:
    async with asyncio.timeout(timeout):
        reply: str | bytes = await ws.request(frame)
    return reply


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
        reply = await ws_request(ws, RESET_FRAME, target.timeout)
        problem = reply_problem(reply)
        if problem:
            col.fail(phase, problem, excerpt(reply))
            _abort(ws)
            return
        t_reset = perf_counter()
        col.reset.append(t_reset - t_open)
        phase = "step"
        reply = await ws_request(ws, step_frame(target, wait), target.timeout + wait)
        problem = reply_problem(reply)
        if problem:
            col.fail(phase, problem, excerpt(reply))
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
        reply = await ws_request(ws, RESET_FRAME, target.timeout)
        problem = reply_problem(reply)
        if problem:
            col.fail(phase, problem, excerpt(reply))
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
    frame = step_frame(target, wait)
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
                    col.fail("step", problem, excerpt(reply))
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
