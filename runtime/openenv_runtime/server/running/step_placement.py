"""Where a plain (non-``async``) ``step()`` runs: the thread pool, or inline once proven cheap.

A step that takes a few microseconds (most generated environments: update a counter, build an
observation) costs the server more in the hop to a pool thread and back — a queue, a thread
wake-up, a cross-thread call back into the event loop — than in the call itself. So each
environment class starts on the pool; its first ``TRIALS`` steps are timed there by the CPU
time of their thread (wall time on a busy machine is mostly waits for the GIL and the CPU), and
once ``TRIALS`` of them stayed under ``CHEAP_CPU`` its steps run inline on the event loop
(more than ``SLOW_TRIALS`` slow ones keep the class on the pool for good; a few are forgiven,
as trials on the pool cost the loop nothing), watched by wall time: a step longer than ``INLINE_WALL_LIMIT`` (blocking I/O, a sleep, a heavy input) is a
strike, and ``STRIKES`` strikes that are more than 1% of the inline steps send the class back
to the pool for the rest of the process, as does a step that raises, and at once a single step
longer than ``INLINE_WALL_HARD`` (no preemption lasts that long; a heavy-tailed environment,
say one compile in a thousand steps, must not stall every session). A blocking step thus holds
the loop a few times at most; the odd preemption of a busy machine does not count, nor does
the time of a garbage collection that lands in a step (``gc_clock.py``).

Only used without a ``step_timeout`` (an inline call cannot be abandoned) and for instances
without a thread of their own (``REQUIRES_SINGLE_THREAD_EXECUTOR``). While a step runs inline
no event loop is marked running on the thread, so code in it sees what it would see on a pool
thread (``asyncio.run`` works, ``asyncio.get_running_loop`` raises).

:class:`PlainStep` is one instance's plain ``step()`` bound with its class's placement.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, Protocol

from openenv_runtime.models import Observation
from openenv_runtime.server.running.gc_clock import GC_SECONDS


class StepRunner(Protocol):
    """What a :class:`PlainStep` needs of the runner that made it (``adapter.EnvRunner``)."""

    @property
    def pool(self) -> Executor: ...

    def check_observation(self, env: Any, method: str, result: Any) -> Observation: ...


_set_running_loop = asyncio.events._set_running_loop
_get_running_loop = asyncio.events._get_running_loop


class StepPlacement:
    """The placement of one environment class's plain ``step()``, learnt from its calls."""

    CHEAP_CPU = 0.0002  # 200 µs of the pool thread's CPU time, every trial
    INLINE_WALL_LIMIT = 0.005  # an inline step over 5 ms is a strike
    INLINE_WALL_HARD = 0.05  # an inline step over 50 ms sends the class back to the pool at once
    STRIKES = 3
    TRIALS = 32
    SLOW_TRIALS = 4  # slow trials forgiven before the class stays on the pool
    __slots__ = ("calls", "demoted", "inline", "slow_trials", "strikes", "trials")

    def __init__(self) -> None:
        self.trials = 0
        self.slow_trials = 0
        self.calls = 0
        self.strikes = 0
        self.inline = False
        self.demoted = False

    def _demote(self) -> None:
        self.demoted, self.inline = True, False

    def timed(self, func: Callable[[Any], Any], action: Any) -> Any:
        """Run ``func(action)`` on a pool thread and judge it (called on that thread)."""
        if self.demoted:
            return func(action)
        cpu, collected = time.thread_time(), GC_SECONDS.seconds
        value = func(action)
        spent = time.thread_time() - cpu
        if spent > self.CHEAP_CPU and spent - (GC_SECONDS.seconds - collected) > self.CHEAP_CPU:
            self.slow_trials += 1
            if self.slow_trials > self.SLOW_TRIALS:
                self._demote()
            return value
        self.trials += 1
        if self.trials >= self.TRIALS:
            self.inline = True
        return value

    def call_inline(self, func: Callable[[Any], Any], action: Any) -> Any:
        """Run ``func(action)`` on the event loop's thread, as if it were a pool thread."""
        loop = _get_running_loop()
        _set_running_loop(None)
        collected = GC_SECONDS.seconds
        started = time.perf_counter()
        try:
            value = func(action)
        except BaseException:
            self._demote()
            raise
        finally:
            _set_running_loop(loop)
        self.calls += 1
        took = time.perf_counter() - started
        if took > self.INLINE_WALL_LIMIT:
            took -= GC_SECONDS.seconds - collected
        if took > self.INLINE_WALL_LIMIT:
            self.strikes += 1
            if took > self.INLINE_WALL_HARD or (
                self.strikes >= self.STRIKES and self.strikes * 100 > self.calls
            ):
                self._demote()
        return value


class PlainStep:
    """A plain ``step()`` bound to one instance: on the pool, or inline once proven cheap.

    ``await bound(action)`` always works; the WebSocket loop calls ``bound.now(action)``
    directly when ``placement.inline`` (no coroutine at all for a step that never waits).
    """

    __slots__ = ("env", "func", "placement", "runner")

    def __init__(
        self, runner: StepRunner, env: Any, func: Callable[[Any], Any], placement: StepPlacement
    ) -> None:
        self.runner = runner
        self.env = env
        self.func = func
        self.placement = placement

    def now(self, action: Any) -> Observation:
        """Run the step inline, on the event loop's thread."""
        result = self.placement.call_inline(self.func, action)
        if isinstance(result, Observation):
            return result
        return self.checked(result)

    def checked(self, result: Any) -> Observation:
        """``result`` of ``step()`` when it is an observation; else ``ContractViolation``."""
        return self.runner.check_observation(self.env, "step", result)

    def pending(self, action: Any) -> asyncio.Future[Any]:
        """The step on a pool thread, judged there (:meth:`StepPlacement.timed`): the future of
        its result, unchecked (:meth:`checked`); awaited by the caller, no coroutine between."""
        # the pool is looked up per call: it is replaced when a step is abandoned
        return asyncio.get_running_loop().run_in_executor(
            self.runner.pool, self.placement.timed, self.func, action
        )

    async def __call__(self, action: Any) -> Observation:
        if self.placement.inline:  # proven cheap: no hop to a thread and back
            return self.now(action)
        result = await self.pending(action)
        if isinstance(result, Observation):
            return result
        return self.checked(result)
