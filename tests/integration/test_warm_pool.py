"""The warm pool on a real server: filled ahead of demand, refilled, bounded by capacity, and
every instance (used or not) closed exactly once."""

from __future__ import annotations

import pytest

from openenv_runtime.testing import running_server
from tests.fixtures.counter import CounterAction, CounterClient, Lifecycle, make_app
from tests.support.servers import get_json, wait_until

pytestmark = pytest.mark.timeout(120)


def health(url: str) -> dict[str, object]:
    return get_json(url + "/health")[1]  # type: ignore[no-any-return]


def test_warm_pool_refills_within_capacity_and_closes_unused_instances() -> None:
    life = Lifecycle()
    app = make_app(life, construct_seconds=0.2, warm_pool=2, max_concurrent_envs=3)
    with running_server(app) as url:
        assert wait_until(lambda: health(url)["warm_instances"] == 2)
        assert life.created == 2

        first = CounterClient(url).sync()
        first.reset()
        assert life.created >= 2
        # refilled to 2 again: 1 session + 2 warm = capacity
        assert wait_until(lambda: health(url)["warm_instances"] == 2 and life.created == 3)

        second, third = CounterClient(url).sync(), CounterClient(url).sync()
        second.reset()
        third.reset()
        assert wait_until(lambda: health(url)["active_sessions"] == 3)
        assert health(url)["warm_instances"] == 0  # never more instances than the capacity
        assert life.created == 3

        assert first.step(CounterAction(delta=5)).observation.total == 5
        first.close()
        # a free slot again: one instance is built ahead of the next session
        assert wait_until(lambda: health(url)["warm_instances"] == 1 and life.created == 4)
        second.close()
        third.close()
        assert wait_until(lambda: health(url)["warm_instances"] == 2 and life.created == 5)
        assert wait_until(lambda: health(url)["active_sessions"] == 0)
        # the used ones (each closed just after its slot is freed); the warm ones wait
        assert wait_until(lambda: life.closed_total() == 3)
    # shutdown closed the two never-used instances as well, each once
    assert life.closed_total() == life.created == 5
    assert life.closed_more_than_once() == []
