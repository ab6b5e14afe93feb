"""A load-generator worker process: runs the jobs its parent (:class:`.loadgen.LoadGenerator`)
sends over a socket pair on its own event loop, and reports what its sessions saw and the CPU
it used itself. Started as ``python -m openenv_cli.bench.worker FD CPUS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import resource
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

from openenv_cli.bench.outcomes import Collector
from openenv_cli.bench.target import Target

from .http_sessions import http_close, http_open_and_reset, http_session, http_steps
from .sessions import Watchdog, ws_close, ws_open_and_reset, ws_session, ws_steps


def raise_open_file_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit; returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    return soft


def _cpu_now() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- inside a worker process -----------------------------------------------------------------


async def _recv_from_parent(conn: Connection) -> Any:
    """Wait for the parent's next message without blocking the event loop."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(conn.fileno(), readable)
    try:
        await ready
    finally:
        loop.remove_reader(conn.fileno())
        os.set_blocking(conn.fileno(), True)  # uvloop makes a watched descriptor non-blocking
    return conn.recv()


async def _bounded(
    tasks: list[asyncio.Task[Any]], stop_at: float, col: Collector, phase: str
) -> None:
    """Wait for ``tasks`` until ``stop_at`` (monotonic); cancel and count the unfinished."""
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=max(0.0, stop_at - time.monotonic()))
    for task in pending:
        task.cancel()
        col.fail(phase, "deadline reached")
    if pending:
        await asyncio.wait(pending, timeout=5.0)


async def _progress_loop(conn: Connection, col: Collector, throughput: bool) -> None:
    last = -1
    while True:
        await asyncio.sleep(0.2)
        done = len(col.step_latencies) if throughput else col.ok + sum(col.errors.values())
        if done != last:
            conn.send(("progress", done))
            last = done


async def _run_sessions(job: dict[str, Any], conn: Connection) -> Collector:
    target: Target = job["target"]
    col = Collector()
    delay = job["start_at"] - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)
    run = ws_session if target.transport == "ws" else http_session
    reporter = asyncio.create_task(_progress_loop(conn, col, throughput=False))
    began = time.monotonic()
    tasks = [asyncio.create_task(run(target, job["wait"], col)) for _ in range(job["count"])]
    await _bounded(tasks, began + job["deadline"], col, "session")
    col.mark_window(began, time.monotonic())
    reporter.cancel()
    return col


async def _run_throughput(job: dict[str, Any], conn: Connection) -> Collector:
    target: Target = job["target"]
    col = Collector()
    stop_at = time.monotonic() + job["deadline"]
    count = job["count"]
    col.attempted = count
    go = asyncio.Event()
    watchdog = Watchdog().start()
    arrived = 0
    all_arrived = asyncio.Event()

    def arrive() -> None:
        nonlocal arrived
        arrived += 1
        if arrived == count:
            all_arrived.set()

    async def one() -> None:
        if target.transport == "ws":
            ws = await ws_open_and_reset(target, col)
            arrive()
            if ws is None:
                return
            await go.wait()
            if await ws_steps(ws, target, job["steps"], job["wait"], col, stop_at, watchdog):
                await ws_close(ws, target, col)
                col.ok += 1
            elif ws.transport is not None:
                ws.transport.abort()
        else:
            opened = await http_open_and_reset(target, col)
            arrive()
            if opened is None:
                return
            http, session_id = opened
            await go.wait()
            ok = await http_steps(
                http, session_id, target, job["steps"], job["wait"], col, stop_at, watchdog
            )
            if await http_close(http, session_id, target, col) and ok:
                col.ok += 1

    tasks = [asyncio.create_task(one()) for _ in range(count)]
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(max(0.0, stop_at - time.monotonic())):
            await all_arrived.wait()
    conn.send(("ready", {"ready": arrived - sum(col.errors.values())}))
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(max(0.0, stop_at - time.monotonic())):
            await _recv_from_parent(conn)  # "go"
    go.set()
    reporter = asyncio.create_task(_progress_loop(conn, col, throughput=True))
    await _bounded(tasks, stop_at, col, "session")
    reporter.cancel()
    watchdog.stop()
    return col


async def _run_idle(job: dict[str, Any], conn: Connection) -> Collector:
    target: Target = job["target"]
    col = Collector()
    col.attempted = job["count"]
    stop_at = time.monotonic() + job["deadline"]
    tasks = [asyncio.create_task(ws_open_and_reset(target, col)) for _ in range(job["count"])]
    await _bounded(tasks, stop_at, col, "session")
    sockets = [
        t.result() for t in tasks if t.done() and not t.cancelled() and t.exception() is None
    ]
    open_ = [ws for ws in sockets if ws is not None]
    col.ok = len(open_)
    conn.send(("ready", {"ready": len(open_)}))
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(max(0.0, stop_at - time.monotonic())):
            await _recv_from_parent(conn)  # "release"
    await asyncio.gather(*(ws_close(ws, target, col) for ws in open_))
    return col


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


_JOBS = {"sessions": _run_sessions, "throughput": _run_throughput, "idle": _run_idle}


def worker_main(conn: Connection, cpus: list[int] | None) -> None:
    """A worker process: run jobs from the parent until told to stop (or the parent goes away)."""
    if cpus:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(0, cpus)
    raise_open_file_limit()
    while True:
        try:
            kind, job = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if kind == "stop" or kind not in _JOBS:
            return
        cpu = _cpu_now()
        loop = _new_loop()
        # Tens of thousands of live connections make every full collection walk them all; a
        # bounded job frees its cycles at the end instead.
        gc.disable()
        try:
            result = loop.run_until_complete(_JOBS[kind](job, conn)).as_dict()
        except Exception as exc:  # report, never die silently: the parent would wait for nothing
            result = Collector(attempted=job.get("count", 0)).as_dict()
            result["errors"] = {f"load generator: {type(exc).__name__}": job.get("count", 0) or 1}
            result["samples"] = [repr(exc)]
        finally:
            loop.close()
            gc.enable()
            gc.collect()
        result["cpu"] = _cpu_now() - cpu
        try:
            conn.send(("result", result))
        except OSError:
            return


def _main(argv: list[str]) -> None:
    fd, cpus = int(argv[0]), argv[1]
    worker_main(Connection(fd), None if cpus == "-" else [int(c) for c in cpus.split(",")])


if __name__ == "__main__":
    _main(sys.argv[1:])
