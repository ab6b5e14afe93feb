"""EnvPool follows a draining replica: its slots move to another replica between episodes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from openenv_runtime import EnvError, EnvPool, StepResult
from openenv_runtime.server import ServerSettings, create_app
from openenv_runtime.testing import running_server
from tests.fixtures.counter import (
    CounterAction,
    CounterClient,
    CounterObservation,
    CounterState,
    Lifecycle,
    counter_env,
)
from tests.support.servers import get_json, post_json, wait_until

pytestmark = pytest.mark.timeout(120)
ADMIN = {"X-OpenEnv-Admin-Token": "let-me-drain"}
LIMIT = 3  # steps per episode
DRAIN_TIMEOUT = 30.0


@contextmanager
def two_servers(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[tuple[str, str], tuple[Lifecycle, Lifecycle]]]:
    monkeypatch.setenv("OPENENV_ADMIN_TOKEN", ADMIN["X-OpenEnv-Admin-Token"])
    lives = Lifecycle(), Lifecycle()
    apps = [
        create_app(
            counter_env(life, limit=LIMIT),
            CounterAction,
            CounterObservation,
            CounterState,
            settings=ServerSettings(web_interface=False, drain_timeout=DRAIN_TIMEOUT),
        )
        for life in lives
    ]
    with running_server(apps[0]) as a, running_server(apps[1]) as b:
        yield (a, b), lives


def active(url: str) -> int:
    return int(get_json(url + "/health")[1]["active_sessions"])


def totals(results: list[Any]) -> list[int]:
    assert all(isinstance(r, StepResult) for r in results), results
    return [r.observation.total for r in results]


async def play_through_a_drain(pool: EnvPool[CounterClient], draining: str) -> list[int]:
    """Start episodes, drain ``draining`` mid-episode, finish them; the slots that were on it."""
    await pool.reset(seeds=[1, 2, 3, 4])
    on_drained = [i for i in range(len(pool)) if pool.server_of(i) == draining]
    assert len(on_drained) == 2
    assert totals(await pool.step([CounterAction()] * 4)) == [1] * 4
    status, body = await asyncio.to_thread(post_json, draining + "/admin/drain", headers=ADMIN)
    assert status == 202 and body["status"] == "draining"
    # the running episodes go on on the draining replica, every step applied once
    assert totals(await pool.step([CounterAction()] * 4)) == [2] * 4
    last = await pool.step([CounterAction()] * 4)
    assert totals(last) == [3] * 4 and all(r.done for r in last)
    return on_drained


def test_slots_move_off_a_draining_replica_at_their_next_reset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with two_servers(monkeypatch) as ((a, b), (life_a, life_b)):

        async def go() -> None:
            async with EnvPool(CounterClient, urls=[a, b], size=4) as pool:
                moved = await play_through_a_drain(pool, a)
                # the reset the draining replica leaves unanswered starts the episode on b
                results = await pool.reset(seeds=[1, 2, 3, 4])
                assert all(isinstance(r, StepResult) for r in results), results
                assert [pool.server_of(i) for i in range(4)] == [b] * 4
                assert pool.drain_moves == len(moved) and pool.failed == []
                # a fresh episode, reset once: the first step counts 1
                assert totals(await pool.step([CounterAction()] * 4)) == [1] * 4
                states = await asyncio.gather(*(pool[i].state() for i in range(4)))
                assert [s.step_count for s in states] == [1] * 4
                # the draining replica is empty long before its drain timeout
                assert await asyncio.to_thread(wait_until, lambda: active(a) == 0, DRAIN_TIMEOUT)
                assert active(b) == 4

        asyncio.run(asyncio.wait_for(go(), 60))
        assert life_a.created == 2 and life_b.created == 4  # no session opened twice
        assert life_a.closed_more_than_once() == []


def test_slots_the_drain_ended_while_idle_move_at_their_next_reset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with two_servers(monkeypatch) as ((a, b), _):

        async def go() -> None:
            async with EnvPool(CounterClient, urls=[a, b], size=4) as pool:
                moved = await play_through_a_drain(pool, a)
                # between episodes and idle: the draining replica ends them (close code 1012)
                assert await asyncio.to_thread(wait_until, lambda: active(a) == 0, DRAIN_TIMEOUT)
                results = await pool.reset(seeds=[1, 2, 3, 4])
                assert all(isinstance(r, StepResult) for r in results), results
                assert [pool.server_of(i) for i in range(4)] == [b] * 4
                assert pool.drain_moves == len(moved)
                assert totals(await pool.step([CounterAction()] * 4)) == [1] * 4

        asyncio.run(asyncio.wait_for(go(), 60))


def test_without_follow_drain_the_slots_fail_and_replace_moves_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with two_servers(monkeypatch) as ((a, b), _):

        async def go() -> None:
            async with EnvPool(CounterClient, urls=[a, b], size=4, follow_drain=False) as pool:
                moved = await play_through_a_drain(pool, a)
                results = await pool.reset(seeds=[1, 2, 3, 4])
                failed = [i for i, r in enumerate(results) if isinstance(r, EnvError)]
                assert failed == moved and pool.failed == moved and pool.drain_moves == 0
                assert await pool.replace_failed() == moved
                assert [pool.server_of(i) for i in range(4)] == [b] * 4

        asyncio.run(asyncio.wait_for(go(), 60))


def test_first_ready_autoreset_moves_off_a_draining_replica(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with two_servers(monkeypatch) as ((a, b), _):

        async def turn(pool: EnvPool[CounterClient]) -> list[Any]:
            await pool.send(range(4), [CounterAction()] * 4)
            got = await pool.recv(min_results=4, timeout=30)
            assert sorted(i for i, _ in got) == [0, 1, 2, 3]
            return [r for _, r in sorted(got, key=lambda pair: pair[0])]

        async def go() -> None:
            async with EnvPool(CounterClient, urls=[a, b], size=4) as pool:
                await pool.reset()
                on_a = [i for i in range(4) if pool.server_of(i) == a]
                assert totals(await turn(pool)) == [1] * 4
                assert (await asyncio.to_thread(post_json, a + "/admin/drain", headers=ADMIN))[
                    0
                ] == 202
                assert totals(await turn(pool)) == [2] * 4
                assert totals(await turn(pool)) == [3] * 4
                # next_step autoreset: this send resets; a's slots reset on b instead of failing
                first = await turn(pool)
                assert totals(first) == [0] * 4 and not any(r.done for r in first)
                assert [pool.server_of(i) for i in range(4)] == [b] * 4
                assert pool.drain_moves == len(on_a) == 2
                assert totals(await turn(pool)) == [1] * 4

        asyncio.run(asyncio.wait_for(go(), 60))
