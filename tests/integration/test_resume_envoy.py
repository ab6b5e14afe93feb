"""Resume through the Envoy front: two replicas, connections cut between the client and Envoy;
every session comes back to the replica that holds it."""

from __future__ import annotations

import pytest

from openenv_runtime.testing import running_server
from tests.fixtures.counter import CounterAction, CounterClient, Lifecycle, make_app
from tests.support.envoy import envoy_binary, running_envoy
from tests.support.optional import reason, unavailable
from tests.support.servers import get_json, wait_until
from tests.support.tcp_proxy import cutting_proxy

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _need_envoy() -> None:
    if envoy_binary() is None:
        unavailable(f"envoy is missing; {reason('envoy')}")


def idle(url: str) -> bool:
    return bool(get_json(url + "/health")[1]["active_sessions"] == 0)


def port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_sessions_resume_on_their_own_replica_through_envoy() -> None:
    lives = [Lifecycle(), Lifecycle()]
    with (
        running_server(make_app(lives[0])) as a,
        running_server(make_app(lives[1])) as b,
        running_envoy([port(a), port(b)]) as front,
        cutting_proxy(front) as proxy,
    ):
        clients = [CounterClient(proxy.url).sync() for _ in range(8)]
        for n, env in enumerate(clients):
            env.reset()
            env.step(CounterAction(delta=n))
        # the ring spreads sessions over both replicas
        counts = [get_json(u + "/health")[1]["active_sessions"] for u in (a, b)]
        assert sum(counts) == 8 and min(counts) > 0
        assert proxy.cut_all() == 8
        for n, env in enumerate(clients):
            assert env.step(CounterAction(delta=1)).observation.total == n + 1
            assert env.client._resumer is not None and env.client._resumer.resumes == 1
        for env in clients:
            env.close()
        assert wait_until(lambda: idle(a) and idle(b))
    for life in lives:
        assert life.closed_total() == life.created and life.closed_more_than_once() == []
    assert lives[0].created + lives[1].created == 8
