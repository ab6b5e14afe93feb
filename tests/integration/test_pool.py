"""EnvPool against real server processes: spreading, capacity refusals, failed slots, timeouts."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import openenv_runtime.client.pool
from openenv_cli.bench.bench_env import BenchAction, BenchObservation
from openenv_runtime import EnvClient, EnvError, EnvPool, GenericEnvClient, State, StepResult
from openenv_runtime.providers import ProcessProvider
from openenv_runtime.providers.base import health
from openenv_runtime.server import ServerSettings

BENCH_APP = "openenv_cli.bench.bench_env:app"


class Bench(EnvClient[BenchAction, BenchObservation, State]):
    pass


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ProcessProvider, list[str]]]:
    """Two bench servers of 6 sessions each."""
    provider = ProcessProvider(
        BENCH_APP, replicas=2, env={"MAX_CONCURRENT_ENVS": "6", "LOG_LEVEL": "warning"}
    )
    with provider as urls:
        yield provider, urls


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_batched_reset_and_step_in_order(servers: tuple[ProcessProvider, list[str]]) -> None:
    _, urls = servers

    async def go() -> None:
        async with EnvPool(Bench, urls=urls, size=8) as pool:
            assert len(pool) == 8
            assert Counter(pool.server_of(i) for i in range(8)) == {urls[0]: 4, urls[1]: 4}
            assert [health(u)["active_sessions"] for u in urls] == [4, 4]  # type: ignore[index]
            results = await pool.reset(seeds=list(range(8)))
            assert all(isinstance(r, StepResult) for r in results)
            results = await pool.step([BenchAction(wait=0.01 * (8 - i)) for i in range(8)])
            assert [type(r) for r in results] == [StepResult] * 8
            state = await pool[3].state()
            assert state.step_count == 1
        assert [health(u)["active_sessions"] for u in urls] == [0, 0]  # type: ignore[index]

    run(go())


def test_spread_follows_free_capacity(servers: tuple[ProcessProvider, list[str]]) -> None:
    _, urls = servers

    async def go() -> None:
        outsiders = [Bench(urls[0]) for _ in range(4)]  # server 0 keeps 2 free, server 1 has 6
        for c in outsiders:
            await c.reset()
        try:
            async with EnvPool(Bench, urls=urls, size=8) as pool:
                assert Counter(pool.server_of(i) for i in range(8)) == {urls[0]: 2, urls[1]: 6}
                assert all(isinstance(r, StepResult) for r in await pool.reset())
        finally:
            for c in outsiders:
                await c.close()

    run(go())


def test_capacity_refusal_moves_the_session(
    servers: tuple[ProcessProvider, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, urls = servers
    real = openenv_runtime.client.pool.health

    def stale(url: str, timeout: float = 5.0) -> dict[str, Any] | None:
        answer = real(url, timeout)
        if answer is not None and url == urls[0]:
            answer = {**answer, "max_sessions": 100}  # a stale view: server 0 looks roomy
        return answer

    monkeypatch.setattr(openenv_runtime.client.pool, "health", stale)

    async def go() -> None:
        async with EnvPool(Bench, urls=urls, size=9) as pool:
            assert Counter(pool.server_of(i) for i in range(9))[urls[0]] == 9
            results = await pool.reset()
            # Server 0 refused 3 sessions with CAPACITY_REACHED; they moved to server 1.
            assert all(isinstance(r, StepResult) for r in results), results
            assert Counter(pool.server_of(i) for i in range(9)) == {urls[0]: 6, urls[1]: 3}
            assert all(isinstance(r, StepResult) for r in await pool.step([BenchAction()] * 9))

    run(go())


def test_errors_stay_in_their_slot(servers: tuple[ProcessProvider, list[str]]) -> None:
    _, urls = servers

    async def go() -> None:
        async with EnvPool(GenericEnvClient, urls=urls, size=3) as pool:
            await pool.reset()
            results = await pool.step([{"wait": 0}, {"wait": "not a number"}, {"wait": 0}])
            assert isinstance(results[0], StepResult) and isinstance(results[2], StepResult)
            assert isinstance(results[1], EnvError) and results[1].code == "VALIDATION_ERROR"
            assert pool.failed == []  # the server kept the session
            assert all(isinstance(r, StepResult) for r in await pool.step([{"wait": 0}] * 3))

    run(go())


def test_timeout_fails_only_the_slow_slots(servers: tuple[ProcessProvider, list[str]]) -> None:
    _, urls = servers

    async def go() -> None:
        async with EnvPool(Bench, urls=urls, size=4) as pool:
            await pool.reset()
            began = time.monotonic()
            actions = [BenchAction(wait=5.0 if i % 2 else 0.0) for i in range(4)]
            results = await pool.step(actions, timeout=0.5)
            assert time.monotonic() - began < 4.5  # returned before the 5 s steps ended
            assert isinstance(results[0], StepResult) and isinstance(results[2], StepResult)
            assert [r.code for r in results[1::2]] == ["TIMEOUT", "TIMEOUT"]  # type: ignore[union-attr]
            assert pool.failed == [1, 3]
            again = await pool.step([BenchAction()] * 4)
            assert [r.code for r in again[1::2]] == ["CLOSED", "CLOSED"]  # type: ignore[union-attr]
            assert await pool.replace_failed() == [1, 3]
            assert all(isinstance(r, StepResult) for r in await pool.reset())

    run(go())


def test_replica_killed_mid_batch() -> None:
    provider = ProcessProvider(
        BENCH_APP, replicas=2, env={"MAX_CONCURRENT_ENVS": "8", "LOG_LEVEL": "warning"}
    )

    async def go() -> None:
        async with EnvPool(Bench, provider=provider, size=8) as pool:
            urls = list(provider.urls)
            await pool.reset()
            victim = provider.processes[0].pid
            batch = asyncio.ensure_future(pool.step([BenchAction(wait=1.0)] * 8))
            await asyncio.sleep(0.3)
            os.killpg(victim, signal.SIGKILL)
            results = await asyncio.wait_for(batch, 20)
            on_victim = [i for i in range(8) if pool.server_of(i) == urls[0]]
            assert on_victim and len(on_victim) < 8
            for i, result in enumerate(results):
                if i in on_victim:
                    assert isinstance(result, EnvError) and result.code == "CLOSED", result
                else:
                    assert isinstance(result, StepResult), result
            assert sorted(pool.failed) == on_victim
            assert sorted(await pool.replace_failed()) == on_victim
            assert {pool.server_of(i) for i in range(8)} == {urls[1]}
            assert all(isinstance(r, StepResult) for r in await pool.reset())
        assert not provider.running

    run(go())


def test_sync_pool_owns_its_provider() -> None:
    provider = ProcessProvider(BENCH_APP, env={"LOG_LEVEL": "warning"})
    with EnvPool(Bench, provider=provider, size=3).sync() as pool:
        assert len(pool) == 3
        assert all(isinstance(r, StepResult) for r in pool.reset(seeds=[1, 2, 3]))
        results = pool.step([BenchAction()] * 3)
        assert all(isinstance(r, StepResult) and r.reward == 1.0 for r in results)
        url = provider.urls[0]
    assert not provider.running and health(url, timeout=0.5) is None


def test_the_readme_rollout_loop_survives_a_lost_server() -> None:
    """The loop of docs/client.md, as written, with one of its two servers killed half-way."""
    provider = ProcessProvider(
        "tests.fixtures.echo_app:app",
        replicas=2,
        env={"MAX_CONCURRENT_ENVS": "8", "LOG_LEVEL": "warning"},
    )

    def policy(observation: Any) -> dict[str, str]:
        return {"message": "x" * (len(observation["echoed_message"]) % 5 + 1)}

    async def rollouts(steps: int = 6) -> list[Any]:
        async with EnvPool(GenericEnvClient, provider=provider, size=6) as pool:
            results = await pool.reset(seeds=range(6))
            for step in range(steps):
                if step == 3:
                    os.killpg(provider.processes[0].pid, signal.SIGKILL)
                results = await pool.step([policy(r.observation) for r in results])
                for i, result in enumerate(results):
                    if isinstance(result, EnvError):
                        await pool.replace(i)
                        results[i] = await pool[i].reset()
            return results

    final = run(rollouts())
    assert all(isinstance(r, StepResult) for r in final)
    assert not provider.running


# -- first-ready: send / recv ------------------------------------------------------------------


def counter_server(limit: int) -> Any:
    """An in-process counter server whose episodes end after ``limit`` steps."""
    from openenv_runtime import create_app
    from openenv_runtime.testing import running_server
    from tests.fixtures.counter import (
        CounterAction,
        CounterObservation,
        CounterState,
        Lifecycle,
        counter_env,
    )

    app = create_app(
        counter_env(Lifecycle(), limit=limit),
        CounterAction,
        CounterObservation,
        CounterState,
        settings=ServerSettings(web_interface=False),
    )
    return running_server(app)


def test_recv_returns_the_first_ready_slots(servers: tuple[ProcessProvider, list[str]]) -> None:
    _, urls = servers

    async def go() -> None:
        async with EnvPool(Bench, urls=urls, size=4) as pool:
            await pool.reset()
            await pool.send([0, 1, 2, 3], [BenchAction(wait=3.0)] + [BenchAction()] * 3)
            first = await pool.recv(min_results=3)
            assert sorted(i for i, _ in first) == [1, 2, 3]
            assert all(isinstance(r, StepResult) for _, r in first)
            assert pool.in_flight == [0]
            with pytest.raises(ValueError, match="in flight"):
                await pool.send([0], [BenchAction()])
            with pytest.raises(RuntimeError, match="recv"):
                await pool.step([BenchAction()] * 4)  # lockstep waits for the first-ready requests
            assert await pool.recv(min_results=1, timeout=0.05) == []  # nothing ready yet
            await pool.send([1], [BenchAction()])
            rest = await pool.recv(min_results=4)  # asks for more than is in flight: waits for 2
            assert sorted(i for i, _ in rest) == [0, 1]
            assert pool.in_flight == []
            with pytest.raises(RuntimeError, match="nothing is in flight"):
                await pool.recv()
            results = await pool.step([BenchAction()] * 4)  # lockstep works again
            assert all(isinstance(r, StepResult) for r in results)

    run(go())


def _step_loop(pool: EnvPool[Any], steps: int) -> Any:
    async def go() -> list[Any]:
        seen = []
        for _ in range(steps):
            await pool.send([0], [{"delta": 1}])
            ((index, result),) = await pool.recv()
            assert index == 0
            seen.append(result)
        return seen

    return go()


def test_autoreset_next_step() -> None:
    with counter_server(limit=2) as url:

        async def go() -> None:
            async with EnvPool(GenericEnvClient, urls=[url], size=1) as pool:
                await pool.reset()
                r = await _step_loop(pool, 4)
                assert [x.observation["total"] for x in r] == [1, 2, 0, 1]
                assert [x.done for x in r] == [False, True, False, False]
                assert r[1].reward == 1.0 and r[2].reward == 0.0  # the reset ignored the action
                assert all(x.final_observation is None for x in r)

        run(go())


def test_autoreset_same_step_keeps_the_final_observation() -> None:
    with counter_server(limit=2) as url:

        async def go() -> None:
            async with EnvPool(GenericEnvClient, urls=[url], size=1, autoreset="same_step") as pool:
                await pool.reset()
                r = await _step_loop(pool, 3)
                assert [x.done for x in r] == [False, True, False]
                assert r[1].observation["total"] == 0  # the new episode's first observation
                assert r[1].final_observation["total"] == 2  # the episode's last one, kept
                assert r[1].reward == 1.0
                assert r[2].observation["total"] == 1

        run(go())


def test_autoreset_disabled_and_send_reset() -> None:
    with counter_server(limit=2) as url:

        async def go() -> None:
            async with EnvPool(GenericEnvClient, urls=[url], size=1, autoreset="disabled") as pool:
                await pool.reset()
                r = await _step_loop(pool, 3)
                assert [x.observation["total"] for x in r] == [1, 2, 3]  # never reset
                await pool.send_reset([0], seeds=[7])
                ((_, again),) = await pool.recv()
                assert isinstance(again, StepResult) and again.observation["total"] == 0
                r = await _step_loop(pool, 1)
                assert r[0].observation["total"] == 1

        run(go())
    with pytest.raises(ValueError, match="autoreset"):
        EnvPool(GenericEnvClient, urls=["http://127.0.0.1:1"], size=1, autoreset="never")  # type: ignore[arg-type]


def test_a_timed_out_slot_is_reported_failed_and_replaced(
    servers: tuple[ProcessProvider, list[str]],
) -> None:
    _, urls = servers

    async def go() -> None:
        async with EnvPool(Bench, urls=urls, size=3, timeout=0.5) as pool:
            await pool.reset()
            old = pool[1]
            await pool.send([0, 1, 2], [BenchAction(), BenchAction(wait=5.0), BenchAction()])
            got = dict(await pool.recv(min_results=3))
            assert isinstance(got[0], StepResult) and isinstance(got[2], StepResult)
            failed = got[1]
            assert isinstance(failed, EnvError) and failed.code == "TIMEOUT"
            assert failed.details["episode_failed"] is True
            # the next send waits for the fresh session and starts a new episode there
            await pool.send([0, 1, 2], [BenchAction()] * 3)
            got = dict(await pool.recv(min_results=3))
            assert all(isinstance(r, StepResult) for r in got.values()), got
            assert pool[1] is not old and pool.failed == []
            assert (await pool[1].state()).step_count == 0  # the send reset the fresh session

    run(go())


def test_a_killed_server_fails_its_slots_which_move_to_the_other() -> None:
    provider = ProcessProvider(
        BENCH_APP, replicas=2, env={"MAX_CONCURRENT_ENVS": "8", "LOG_LEVEL": "warning"}
    )

    async def go() -> None:
        async with EnvPool(Bench, provider=provider, size=6) as pool:
            urls = list(provider.urls)
            await pool.reset()
            on_victim = [i for i in range(6) if pool.server_of(i) == urls[0]]
            await pool.send(range(6), [BenchAction(wait=1.0)] * 6)
            await asyncio.sleep(0.3)
            os.killpg(provider.processes[0].pid, signal.SIGKILL)
            got = dict(await pool.recv(min_results=6))
            for i, result in got.items():
                if i in on_victim:
                    assert isinstance(result, EnvError) and result.details["episode_failed"]
                else:
                    assert isinstance(result, StepResult), result
            await pool.send(range(6), [BenchAction()] * 6)
            again = dict(await pool.recv(min_results=6))
            assert all(isinstance(r, StepResult) for r in again.values()), again
            assert {pool.server_of(i) for i in range(6)} == {urls[1]}

    run(go())


def test_sync_first_ready(servers: tuple[ProcessProvider, list[str]]) -> None:
    _, urls = servers
    with EnvPool(Bench, urls=urls, size=2).sync() as pool:
        pool.reset()
        pool.send([0, 1], [BenchAction(), BenchAction()])
        got = pool.recv(min_results=2)
        assert sorted(i for i, _ in got) == [0, 1]
        pool.send_reset([1])
        assert pool.in_flight in ([1], [])
        assert [i for i, _ in pool.recv()] == [1]
