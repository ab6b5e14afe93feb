"""The load generator: simulated clients spread over worker processes, each with its own loop.

A :class:`LoadGenerator` starts ``processes`` workers once (``spawn``; each runs uvloop
when installed, raises its open-file limit, and may be pinned to CPUs) and hands each
run to all of them, split evenly. Workers report back over a pipe what their sessions
saw and how much CPU they used themselves (``getrusage``), so the load generator's own
cost is always reported beside the server's. Three workloads:

* :meth:`LoadGenerator.sessions` — N sessions at once, each connect, reset, one step
  with ``wait``, close (the scaling-study workload);
* :meth:`LoadGenerator.throughput` — C sessions connect and reset, wait for each other
  (a barrier across processes), then each does K back-to-back steps;
* :meth:`LoadGenerator.idle` — N sessions connect, reset and stay open until released
  (to measure the server's memory per idle session).

Everything is bounded: every operation by the target's timeout, each run by a deadline
after which workers stop their sessions and report what they have, and a worker that
does not answer within the deadline plus a grace period is killed and replaced.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from openenv_cli.bench.target import Target

from .worker import raise_open_file_limit

GRACE_S = 15.0
ProgressFn = Callable[[int, int], None]

__all__ = ["LoadGenerator", "merge", "raise_open_file_limit", "split"]


def merge(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One result from the workers' results (lists concatenated, counts added, windows joined)."""
    merged: dict[str, Any] = {
        "attempted": 0,
        "ok": 0,
        "errors": {},
        "samples": [],
        "connect": [],
        "reset": [],
        "step": [],
        "total": [],
        "step_latencies": [],
        "steps": 0,
        "window": [],
        "cpu": 0.0,
    }
    for part in results:
        for key in ("attempted", "ok", "steps", "cpu"):
            merged[key] += part.get(key, 0)
        for key in ("connect", "reset", "step", "total", "step_latencies"):
            merged[key].extend(part.get(key, ()))
        for label, count in part.get("errors", {}).items():
            merged["errors"][label] = merged["errors"].get(label, 0) + count
        merged["samples"].extend(part.get("samples", ())[: max(0, 5 - len(merged["samples"]))])
        window = part.get("window")
        if window:
            merged["window"] = (
                window
                if not merged["window"]
                else [min(merged["window"][0], window[0]), max(merged["window"][1], window[1])]
            )
    return merged


def split(total: int, parts: int) -> list[int]:
    """``total`` spread over ``parts`` as evenly as possible (zeros dropped)."""
    base, extra = divmod(total, parts)
    return [n for n in (base + (1 if i < extra else 0) for i in range(parts)) if n > 0]


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    conn: Connection
    progress: int = 0


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


class LoadGenerator:
    """A pool of load-generating worker processes. Use as a context manager.

    Workers are plain ``python -m openenv_cli.bench.worker`` subprocesses talking over a
    socket pair, so they never re-import the caller's ``__main__``.
    """

    def __init__(self, processes: int = 1, cpus: list[int] | None = None) -> None:
        if processes < 1:
            raise ValueError("processes must be at least 1")
        self.processes = processes
        self.cpus = cpus
        self._workers: list[_Worker | None] = [None] * processes

    def __enter__(self) -> LoadGenerator:
        try:
            for slot in range(self.processes):
                self._start(slot)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w is not None]

    def _start(self, slot: int) -> _Worker:
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_package_root(), env.get("PYTHONPATH")) if p
        )
        cpus = ",".join(map(str, self.cpus)) if self.cpus else "-"
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "openenv_cli.bench.worker", str(theirs.fileno()), cpus],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            theirs.close()
        worker = _Worker(process, Connection(ours.detach()))
        self._workers[slot] = worker
        return worker

    def _stop(self, slot: int, polite: bool) -> None:
        worker = self._workers[slot]
        if worker is None:
            return
        if polite:
            with contextlib.suppress(OSError):
                worker.conn.send(("stop", None))
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(5)
        if worker.process.poll() is None:
            worker.process.kill()
            worker.process.wait(5)
        worker.conn.close()
        self._workers[slot] = None

    def close(self) -> None:
        """Stop every worker (politely, then by force)."""
        for slot in range(self.processes):
            self._stop(slot, polite=True)

    # -- running jobs --

    def _dispatch(self, kind: str, counts: list[int], job: dict[str, Any]) -> list[int]:
        slots = list(range(len(counts)))
        for slot, count in zip(slots, counts, strict=True):
            worker = self._workers[slot]
            if worker is None:
                worker = self._start(slot)
            worker.progress = 0
            worker.conn.send((kind, {**job, "count": count}))
        return slots

    def _collect(
        self,
        slots: list[int],
        expect: str,
        until: float,
        total: int,
        on_progress: ProgressFn | None,
    ) -> dict[int, Any]:
        """Wait for one ``expect`` message from each slot; a worker that misses ``until`` is replaced."""
        got: dict[int, Any] = {}
        while len(got) < len(slots):
            for slot in slots:
                worker = self._workers[slot]
                if slot in got:
                    continue
                if worker is None:
                    got[slot] = None
                    continue
                try:
                    while worker.conn.poll(0.02):
                        kind, payload = worker.conn.recv()
                        if kind == "progress":
                            worker.progress = payload
                            continue
                        # Anything unexpected (a worker that failed before its barrier) ends its part.
                        got[slot] = payload if kind == expect else None
                        break
                except (EOFError, OSError):
                    self._stop(slot, polite=False)
                    got[slot] = None
            if on_progress is not None:
                on_progress(
                    sum(w.progress for s in slots if (w := self._workers[s]) is not None), total
                )
            if time.monotonic() > until:
                for slot in slots:
                    if slot not in got:
                        self._stop(slot, polite=False)
                        got[slot] = None
        return got

    def _finish(
        self,
        slots: list[int],
        counts: list[int],
        until: float,
        total: int,
        on_progress: ProgressFn | None,
    ) -> dict[str, Any]:
        got = self._collect(slots, "result", until, total, on_progress)
        results = []
        for slot, count in zip(slots, counts, strict=True):
            payload = got.get(slot)
            if payload is None:
                payload = {
                    "attempted": count,
                    "errors": {"load generator: worker did not answer (stopped)": count},
                }
            results.append(payload)
        if on_progress is not None:
            on_progress(total, total)
        return merge(results)

    def sessions(
        self,
        target: Target,
        batch: int,
        wait: float,
        deadline: float,
        on_progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        """``batch`` concurrent sessions (connect, reset, step with ``wait``, close), all started at once.

        Returns the merged result; ``wall`` is the time from the common start until the
        last session ended (as the workers saw it).
        """
        counts = split(batch, self.processes)
        start_at = time.monotonic() + 0.05 * len(counts)
        slots = self._dispatch(
            "sessions",
            counts,
            {"target": target, "wait": wait, "deadline": deadline, "start_at": start_at},
        )
        result = self._finish(slots, counts, start_at + deadline + GRACE_S, batch, on_progress)
        window = result.get("window") or [start_at, time.monotonic()]
        result["wall"] = max(1e-9, window[1] - window[0])
        return result

    def throughput(
        self,
        target: Target,
        sessions: int,
        steps: int,
        wait: float,
        deadline: float,
        on_progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        """``sessions`` sessions doing ``steps`` back-to-back steps each, after a common start.

        ``window`` in the result is [first step sent, last reply received] (monotonic).
        """
        counts = split(sessions, self.processes)
        started = time.monotonic()
        slots = self._dispatch(
            "throughput",
            counts,
            {"target": target, "steps": steps, "wait": wait, "deadline": deadline},
        )
        until = started + deadline + GRACE_S
        ready = self._collect(slots, "ready", until, sessions * steps, None)
        live = [s for s in slots if ready.get(s) is not None]
        for slot in live:
            worker = self._workers[slot]
            if worker is not None:
                worker.conn.send(("go", None))
        result = self._finish(
            live,
            [c for s, c in zip(slots, counts, strict=True) if s in live],
            until,
            sessions * steps,
            on_progress,
        )
        lost = sum(c for s, c in zip(slots, counts, strict=True) if s not in live)
        if lost:
            result["attempted"] += lost
            result["errors"]["load generator: worker did not answer (stopped)"] = lost
        result["ready"] = sum(r["ready"] for r in ready.values() if r)
        return result

    @contextlib.contextmanager
    def idle(self, target: Target, count: int, deadline: float) -> Iterator[int]:
        """Hold ``count`` open, reset, idle WebSocket sessions for the block; yields how many are open.

        The workers close them when the block ends, or by themselves at ``deadline``.
        """
        counts = split(count, self.processes)
        started = time.monotonic()
        slots = self._dispatch("idle", counts, {"target": target, "deadline": deadline})
        ready = self._collect(slots, "ready", started + deadline + GRACE_S, count, None)
        try:
            yield sum(r["ready"] for r in ready.values() if r)
        finally:
            alive = [s for s in slots if ready.get(s) is not None]
            for slot in alive:
                worker = self._workers[slot]
                if worker is not None:
                    with contextlib.suppress(OSError):
                        worker.conn.send(("release", None))
            self._collect(alive, "result", time.monotonic() + 60 + GRACE_S, count, None)
