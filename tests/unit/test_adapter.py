import asyncio
import gc
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from openenv_runtime import Environment, Observation, State
from openenv_runtime.server.running.adapter import (
    ClassAdapter,
    ContractViolation,
    EnvRunner,
    LifecycleCost,
)
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


class Patient(LifecycleCost):
    """Bounds a busy test machine cannot cross by accident (preemption, a GC pause).

    The decision logic is what is tested; the real bounds are tuned for production.
    """

    CHEAP_CPU = 0.05
    WALL_LIMIT = 5.0


def burn_cpu(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU time, however busy the machine is."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def test_cheap_calls_move_inline_and_a_slow_one_goes_back_to_the_pool_for_good() -> None:
    cost = Patient()
    pool = ThreadPoolExecutor(2)
    main = threading.get_ident()
    seen: list[bool] = []

    def cheap() -> None:
        seen.append(threading.get_ident() == main)

    async def go() -> None:
        for _ in range(LifecycleCost.TRIALS + 2):
            await cost.run(pool, cheap)
        assert (
            seen[: LifecycleCost.TRIALS] == [False] * LifecycleCost.TRIALS
        )  # on the pool while unproven
        assert seen[-1] is True and cost.inline  # then inline
        await cost.run(pool, lambda: burn_cpu(0.1))  # one CPU-heavy call, inline
        assert not cost.inline and cost.demoted
        seen.clear()
        for _ in range(LifecycleCost.TRIALS + 2):
            await cost.run(pool, cheap)
        assert seen == [False] * (LifecycleCost.TRIALS + 2)  # never inline again

    run(go())


def test_one_slow_call_on_the_pool_is_forgiven_and_a_collection_is_not_counted() -> None:
    cost = LifecycleCost()
    pool = ThreadPoolExecutor(2)
    heap = [[i] for i in range(3_000_000)]  # a collection of it takes far over WALL_LIMIT

    async def go() -> None:
        await cost.run(pool, lambda: burn_cpu(LifecycleCost.CHEAP_CPU * 4))
        await cost.run(pool, gc.collect)
        for _ in range(LifecycleCost.TRIALS):
            await cost.run(pool, lambda: None)
        assert cost.inline and cost.slow_calls == 1

    run(go())
    del heap


def test_blocking_io_on_the_pool_is_never_promoted() -> None:
    cost = LifecycleCost()
    pool = ThreadPoolExecutor(2)

    async def go() -> None:
        for _ in range(3):
            await cost.run(
                pool, lambda: time.sleep(LifecycleCost.WALL_LIMIT * 1.2)
            )  # no CPU, but blocking
        assert not cost.inline and cost.demoted

    run(go())


def test_base_close_is_skipped() -> None:
    class NoClose(Environment):
        def reset(self, seed=None, episode_id=None, **kw):  # type: ignore[no-untyped-def]
            return Observation()

        def step(self, action, **kw):  # type: ignore[no-untyped-def]
            return Observation()

        @property
        def state(self) -> State:
            return State()

    assert ClassAdapter(NoClose).close is None
    assert ClassAdapter(EchoEnvironment).close is not None


def test_reset_gets_only_the_keys_its_signature_accepts() -> None:
    class Narrow(EchoEnvironment):
        def reset(self, seed=None):  # type: ignore[no-untyped-def,override]
            return EchoObservation(metadata={"seed": seed})

    runner = EnvRunner(Narrow, 1, EchoObservation)

    async def go() -> Observation:
        env = await runner.create()
        return await runner.reset(env, {"seed": 4, "episode_id": "x", "other": 1})

    assert run(go()).metadata == {"seed": 4}


def test_wrong_return_type_is_a_contract_violation_that_says_what_to_return() -> None:
    class Wrong(EchoEnvironment):
        def step(self, action, **kw):  # type: ignore[no-untyped-def,override]
            return {"echoed_message": "x"}

    runner = EnvRunner(Wrong, 1, EchoObservation)

    async def go() -> None:
        env = await runner.create()
        await runner.bind_step(env)(EchoAction(message="x"))

    with pytest.raises(ContractViolation, match=r"return EchoObservation\("):
        run(go())


def test_state_may_be_an_async_method() -> None:
    class AsyncState(EchoEnvironment):
        async def state(self) -> State:  # type: ignore[override]
            return State(step_count=5)

    runner = EnvRunner(AsyncState, 1, EchoObservation)

    async def go() -> State:
        return await runner.state(await runner.create())

    assert run(go()).step_count == 5


class _Flaky(EchoEnvironment):
    """Echo whose reset raises for seed 13 and answers on whichever thread runs it."""

    threads: list[int] = []  # noqa: RUF012 (a test's record)

    def reset(self, seed: int | None = None, **kwargs: object) -> EchoObservation:
        _Flaky.threads.append(threading.get_ident())
        if seed == 13:
            raise ValueError("unlucky")
        return super().reset()


def test_reset_many_answers_each_job_and_runs_the_batch_in_one_pool_job_then_inline() -> None:
    async def main() -> None:
        runner = EnvRunner(_Flaky, 4, EchoObservation)
        envs = [await runner.create() for _ in range(3)]
        loop_thread = threading.get_ident()
        _Flaky.threads.clear()
        outcome = await runner.reset_many(
            [(envs[0], {"seed": 1}), (envs[1], {"seed": 13}), (envs[2], {"bogus": 1})]
        )
        assert isinstance(outcome[0], EchoObservation) and isinstance(outcome[2], EchoObservation)
        assert isinstance(outcome[1], ValueError)  # one job's error, the others answered
        assert len(set(_Flaky.threads)) == 1 and loop_thread not in _Flaky.threads  # one hop
        placement = runner.adapter_for(envs[0]).reset_placement
        assert not placement.demoted
        placement.inline = True  # as after its trials proved resets cheap
        _Flaky.threads.clear()
        await runner.reset_many([(env, {}) for env in envs])
        assert set(_Flaky.threads) == {loop_thread}
        runner.shutdown()

    run(main())
