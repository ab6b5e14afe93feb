"""A plain step() moves inline on the event loop once proven cheap, and back to the pool for good."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from typing import Any

from openenv_runtime import Environment, Observation, State
from openenv_runtime.server.running.adapter import EnvRunner
from openenv_runtime.server.running.step_placement import StepPlacement


class Patient(StepPlacement):
    """Bounds a busy test machine cannot cross by accident (preemption, a GC pause)."""

    CHEAP_CPU = 0.05
    INLINE_WALL_LIMIT = 0.5
    INLINE_WALL_HARD = 5.0


class Probe(Environment[Any, Observation, State]):
    """Records the thread of each step; ``action`` says how long to sleep or what to raise."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self.threads: list[int] = []
        self.saw_loop: list[bool] = []

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kw: Any
    ) -> Observation:
        return Observation()

    def step(self, action: Any, **kw: Any) -> Observation:
        self.threads.append(threading.get_ident())
        try:
            asyncio.get_running_loop()
            self.saw_loop.append(True)
        except RuntimeError:
            self.saw_loop.append(False)
        if action == "raise":
            raise ValueError("bad action")
        if isinstance(action, float):
            time.sleep(action)
        return Observation()

    @property
    def state(self) -> State:
        return State()


def burn_cpu(seconds: float) -> None:
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def runner(step_timeout: float | None = None) -> EnvRunner:
    return EnvRunner(Probe, 4, Observation, step_timeout)


def steps(env_runner: EnvRunner, actions: list[Any]) -> tuple[Probe, list[bool], int]:
    """Run ``actions`` through a bound step; ``(env, inline per step, the loop's thread)``."""

    async def go() -> tuple[Probe, list[bool], int]:
        env = await env_runner.create()
        env_runner.adapter_for(env).step_placement = Patient()
        step = env_runner.bind_step(env)
        for action in actions:
            try:
                await step(action)
            except ValueError:
                pass
        loop_thread = threading.get_ident()
        return env, [t == loop_thread for t in env.threads], loop_thread

    try:
        return asyncio.run(go())
    finally:
        env_runner.shutdown()


def test_cheap_steps_move_inline_after_the_trials() -> None:
    env, inline, _ = steps(runner(), [None] * (StepPlacement.TRIALS + 3))
    assert inline == [False] * StepPlacement.TRIALS + [True] * 3
    assert not any(env.saw_loop)  # inline, the step sees no running loop (as on a pool thread)


def test_slow_inline_steps_send_the_class_back_to_the_pool_for_good() -> None:
    actions: list[Any] = [None] * StepPlacement.TRIALS + [None, 0.6, 0.6, 0.6, None, None]
    _, inline, _ = steps(runner(), actions)
    assert inline[StepPlacement.TRIALS :] == [True, True, True, True, False, False]


def test_a_step_that_raises_inline_sends_the_class_back_to_the_pool() -> None:
    actions: list[Any] = [None] * StepPlacement.TRIALS + ["raise", None]
    _, inline, _ = steps(runner(), actions)
    assert inline[StepPlacement.TRIALS :] == [True, False]


def test_rare_slow_inline_steps_are_forgiven() -> None:
    placement = StepPlacement()
    placement.inline = True
    slow = StepPlacement.INLINE_WALL_LIMIT * 2
    for i in range(1000):
        placement.call_inline(time.sleep if i % 200 == 0 else abs, slow)  # abs: no syscall
    assert placement.inline  # 5 strikes in 1,000 steps: a busy machine's preemptions


def test_cpu_heavy_trials_keep_the_class_on_the_pool_and_a_few_are_forgiven() -> None:
    placement = StepPlacement()
    for _ in range(StepPlacement.SLOW_TRIALS):
        placement.timed(burn_cpu, StepPlacement.CHEAP_CPU * 3)
    assert not placement.demoted  # a trial on the pool costs the loop nothing: forgiven
    for _ in range(StepPlacement.TRIALS):
        placement.timed(abs, 1)
    assert placement.inline

    heavy = StepPlacement()
    for _ in range(StepPlacement.SLOW_TRIALS + 1):
        heavy.timed(burn_cpu, StepPlacement.CHEAP_CPU * 3)
    assert heavy.demoted
    for _ in range(StepPlacement.TRIALS):
        heavy.timed(abs, 1)
    assert not heavy.inline


class Unforgiving(StepPlacement):
    """No slow trial forgiven: only the collector's rule is left to keep a trial cheap."""

    SLOW_TRIALS = 0


def collect_a_big_heap(_: Any) -> None:
    """A step during which the collector walks a heap far over the hard bound."""
    started = time.perf_counter()
    gc.collect()
    assert time.perf_counter() - started > StepPlacement.INLINE_WALL_HARD


def test_a_garbage_collection_inside_a_step_is_not_the_steps_cost() -> None:
    heap = [[i] for i in range(3_000_000)]  # a process holding a model or a dataset
    inline = StepPlacement()
    inline.inline = True
    inline.call_inline(collect_a_big_heap, None)
    assert inline.inline and inline.strikes == 0

    trial = Unforgiving()
    trial.timed(collect_a_big_heap, None)
    assert not trial.demoted and trial.trials == 1
    del heap


def test_with_a_step_timeout_every_step_stays_on_the_pool() -> None:
    _, inline, _ = steps(runner(step_timeout=5.0), [None] * (StepPlacement.TRIALS + 3))
    assert not any(inline)  # an inline call could not be abandoned at the timeout


def test_one_very_slow_inline_step_demotes_at_once() -> None:
    placement = StepPlacement()
    placement.inline = True
    for _ in range(10_000):
        placement.call_inline(abs, 1)  # many cheap steps: one strike is far below 1%
    placement.call_inline(time.sleep, StepPlacement.INLINE_WALL_HARD * 2)
    assert placement.demoted and not placement.inline  # a compile in the tail: back to the pool
