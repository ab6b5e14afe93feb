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
from time import perf_counter
from typing import Any

from .auth import auth_headers

# Where the load goes, and what went wrong, are part of this module's face.
from .outcomes import OBSERVATION_PREFIXES, Collector, describe_failure, excerpt, reply_problem
from .target import RESET_FRAME, Target, step_frame
from .wsclient import open_connection

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
            if not (isinstance(reply, str) and reply.startswith(OBSERVATION_PREFIXES)):
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
