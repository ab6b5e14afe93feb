"""EnvPool's placement rule, without servers: most free capacity first, then fewest of ours."""

from __future__ import annotations

from collections import Counter

from openenv_runtime import GenericEnvClient
from openenv_runtime.client.pool import UNLIMITED, EnvPool, _Server


def pool_with(**free: int) -> EnvPool[GenericEnvClient]:
    pool = EnvPool(GenericEnvClient, urls=list(free), size=1)
    pool._servers = {url: _Server(url, n) for url, n in free.items()}
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
