"""Where a plain (non-``async``) ``step()`` runs: the thread pool, or inline once proven cheap.

A step that takes a few microseconds (most generated environments: update a counter, build an
observation) costs the server more in the hop to a pool thread and back — a queue, a thread
wake-up, a cross-thread call back into the event loop — than in the call itself. So each
environment class starts on the pool; its first ``TRIALS`` steps are timed there (CPU time of
the thread, and wall time, which catches blocking I/O), and when all were cheap its later steps
run inline on the event loop. The decision is watched for good: a step that raises while
inline, or runs longer than ``INLINE_WALL_LIMIT``, sends the class back to the pool for the
rest of the process, so a slow or blocking step holds the loop at most once.

Only used without a ``step_timeout`` (an inline call cannot be abandoned) and for instances
without a thread of their own (``REQUIRES_SINGLE_THREAD_EXECUTOR``). While a step runs inline
no event loop is marked running on the thread, so code in it sees what it would see on a pool
thread (``asyncio.run`` works, ``asyncio.get_running_loop`` raises).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

_set_running_loop = asyncio.events._set_running_loop
_get_running_loop = asyncio.events._get_running_loop


class StepPlacement:
    """The placement of one environment class's plain ``step()``, learnt from its calls."""

    CHEAP_CPU = 0.0002  # 200 µs of the pool thread's CPU
    CHEAP_WALL = 0.001  # and 1 ms of wall time: no blocking I/O
    INLINE_WALL_LIMIT = 0.002  # an inline step over 2 ms sends the class back to the pool
    TRIALS = 32
    __slots__ = ("cheap_calls", "demoted", "inline")

    def __init__(self) -> None:
        self.cheap_calls = 0
        self.inline = False
        self.demoted = False

    def timed(self, func: Callable[[Any], Any], action: Any) -> Any:
        """Run ``func(action)`` on a pool thread and judge it (called on that thread)."""
        wall, cpu = time.perf_counter(), time.thread_time()
        value = func(action)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        if cpu > self.CHEAP_CPU or wall > self.CHEAP_WALL:
            self.demoted, self.inline = True, False
        elif not self.demoted:
            self.cheap_calls += 1
            self.inline = self.cheap_calls >= self.TRIALS
        return value

    def call_inline(self, func: Callable[[Any], Any], action: Any) -> Any:
        """Run ``func(action)`` on the event loop's thread, as if it were a pool thread."""
        loop = _get_running_loop()
        _set_running_loop(None)
        started = time.perf_counter()
        try:
            value = func(action)
        except BaseException:
            self.demoted, self.inline = True, False
            raise
        finally:
            _set_running_loop(loop)
        if time.perf_counter() - started > self.INLINE_WALL_LIMIT:
            self.demoted, self.inline = True, False
        return value
