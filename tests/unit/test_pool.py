"""EnvPool's placement rule, without servers: most free capacity first, then fewest of ours."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from openenv_runtime import EnvError, GenericEnvClient
from openenv_runtime.client import pool as pool_module
from openenv_runtime.client.placement import UNLIMITED, Server, accepting, free_sessions, spread
from openenv_runtime.client.pool import EnvPool
from tests.support.placement import pool_over_room


def pool_with(**free: int) -> EnvPool[GenericEnvClient]:
    pool = EnvPool(GenericEnvClient, urls=list(free), size=1)
    pool._servers = {url: Server(url, n) for url, n in free.items()}
    return pool


def test_fills_the_roomiest_server_first() -> None:
    pool = pool_with(a=2, b=6)
    assert Counter(pool._pick_server() for _ in range(8)) == {"a": 2, "b": 6}


def test_full_servers_share_the_overflow_evenly() -> None:
    pool = pool_with(a=0, b=0)
    assert Counter(pool._pick_server() for _ in range(6)) == {"a": 3, "b": 3}


def test_unknown_capacity_counts_as_unlimited() -> None:
    pool = pool_with(a=UNLIMITED, b=UNLIMITED)
    assert Counter(pool._pick_server() for _ in range(4)) == {"a": 2, "b": 2}


def test_excluded_servers_are_skipped_while_others_exist() -> None:
    pool = pool_with(a=5, b=1)
    assert pool._pick_server(exclude=["a"]) == "b"
    assert pool._pick_server(exclude=["a", "b"]) in ("a", "b")  # nowhere else to go


def test_a_refusal_marks_the_server_full() -> None:
    pool = pool_with(a=5, b=1)
    assert pool._pick_server() == "a"
    pool._release("a", full=True)
    assert pool._servers["a"].free == 0 and pool._pick_server() == "b"


def test_forks_spread_by_free_capacity_without_counting_as_slots() -> None:
    from openenv_runtime.client.placement import spread

    pool = pool_with(a=1, b=3)
    assert Counter(spread(pool._servers.values(), 4)) == {"a": 1, "b": 3}
    assert Counter(spread(pool._servers.values(), 6)) == {"a": 3, "b": 3}  # then the fewest
    assert [(s.free, s.sessions) for s in pool._servers.values()] == [(1, 0), (3, 0)]
    assert Counter(spread(pool_with(a=UNLIMITED, b=UNLIMITED)._servers.values(), 5)) == {
        "a": 3,
        "b": 2,
    }


def test_a_draining_or_silent_server_gets_no_new_session_while_another_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers: dict[str, dict[str, Any] | None] = {
        "http://a": {"status": "draining", "active_sessions": 0, "max_sessions": 100},
        "http://b": {"status": "healthy", "active_sessions": 99, "max_sessions": 100},
        "http://c": None,  # does not answer /health
    }
    monkeypatch.setattr(pool_module, "health", lambda url, timeout: answers[url])
    pool = EnvPool(GenericEnvClient, urls=list(answers), size=1)
    asyncio.run(pool._refresh_capacity())
    assert [(s.url, s.free, s.accepting) for s in pool._servers.values()] == [
        ("http://a", 0, False),
        ("http://b", 1, True),
        ("http://c", 0, False),
    ]
    # b is full after one, yet the overflow stays on it: the others would refuse (or are gone).
    assert Counter(pool._pick_server() for _ in range(3)) == {"http://b": 3}
    assert set(spread(pool._servers.values(), 4)) == {"http://b"}
    # Every server draining: nowhere better to go, so they share (and refusals move slots on).
    answers["http://b"] = {"status": "draining"}
    asyncio.run(pool._refresh_capacity())
    assert pool._pick_server() in answers


def test_a_server_that_does_not_say_its_status_is_taken_at_its_word() -> None:
    assert accepting({"active_sessions": 1, "max_sessions": 2})
    assert free_sessions({"active_sessions": 1, "max_sessions": 2}) == 1
    assert not accepting({"status": "draining"}) and not accepting(None)


def test_replacing_many_failed_slots_places_them_on_one_reading_of_health(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a can take 3 more sessions, b 2; five failed slots replaced at once must fit both,
    # not each re-read /health (which does not show the others' picks yet) and crowd onto a.
    pool = pool_over_room(monkeypatch, size=5)

    async def scenario() -> list[int]:
        await pool.open()
        for i in range(pool.size):
            pool.fail_slot(i, EnvError("CONNECTION_ERROR", "lost"))
        return await pool.replace_failed()

    assert asyncio.run(scenario()) == [0, 1, 2, 3, 4]
    assert Counter(pool.server_of(i) for i in range(5)) == {"http://a": 3, "http://b": 2}
