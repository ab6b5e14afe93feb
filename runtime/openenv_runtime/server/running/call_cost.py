"""Where a plain constructor or ``close()`` runs: the thread pool, or inline once proven cheap."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from openenv_runtime.server.running.gc_clock import GC_SECONDS


class LifecycleCost:
    """Decides where a plain constructor or ``close()`` runs: the pool until proven cheap.

    Creating and closing an instance happens once per session; for a cheap ``__init__`` the
    hop to the thread pool and back costs more than the call. Calls are judged by the CPU
    time of the thread that ran them (wall time on a busy machine includes GIL waits and
    preemption), plus a wall-clock bound that catches blocking I/O; a garbage collection that
    lands in a call is not counted (``gc_clock.py``). After ``TRIALS`` cheap calls on the
    pool it runs inline on the event loop; more than ``SLOW_TRIALS`` expensive calls on the
    pool, or one inline, send it back to the pool for good, so a heavy constructor (a model
    load) never blocks the loop more than once.
    """

    CHEAP_CPU = 0.0005
    INLINE_CPU_LIMIT = 0.002
    WALL_LIMIT = 0.1
    TRIALS = 16
    SLOW_TRIALS = 2
    __slots__ = ("cheap_calls", "demoted", "inline", "slow_calls")

    def __init__(self) -> None:
        self.cheap_calls = 0
        self.slow_calls = 0
        self.inline = False
        self.demoted = False

    @staticmethod
    def _timed(func: Callable[[], Any]) -> tuple[Any, float, float]:
        collected = GC_SECONDS.seconds
        wall, cpu = time.perf_counter(), time.thread_time()
        value = func()
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        collecting = GC_SECONDS.seconds - collected
        return value, cpu - collecting, wall - collecting

    async def run(self, pool: ThreadPoolExecutor, func: Callable[[], Any]) -> Any:
        if self.inline:
            result, cpu, wall = self._timed(func)
            if cpu > self.INLINE_CPU_LIMIT or wall > self.WALL_LIMIT:
                self.inline, self.demoted = False, True
            return result
        result, cpu, wall = await asyncio.get_running_loop().run_in_executor(
            pool, self._timed, func
        )
        if cpu > self.CHEAP_CPU or wall > self.WALL_LIMIT:
            self.slow_calls += 1
            self.demoted = self.slow_calls > self.SLOW_TRIALS
        elif not self.demoted:
            self.cheap_calls += 1
            self.inline = self.cheap_calls >= self.TRIALS
        return result
