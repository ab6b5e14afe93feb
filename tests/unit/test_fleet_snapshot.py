"""openenv top's numbers: a server's /metrics text read back, and two readings turned into
steps/s and step latency quantiles."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from openenv_cli.fleet.snapshot import (
    Snapshot,
    from_health,
    from_metrics,
    increase,
    quantile,
    replica_view,
    window_buckets,
)
from openenv_runtime import __version__
from openenv_runtime.server.metrics import WS_OK, Tally, families, series

HEALTH = {"status": "healthy", "runtime_version": __version__, "workers": 1}


def manager(active: int, capacity: int) -> Any:
    """What the runtime's exporter reads of a session registry, as plain values."""
    return SimpleNamespace(
        sessions={str(i): SimpleNamespace(kind="ws") for i in range(active)},
        detached=1,
        capacity=capacity,
        warm=[],
        abandoned=2,
        runner=SimpleNamespace(stuck_threads=3),
    )


def metrics_text(tally: Tally, active: int = 4, capacity: int = 64) -> str:
    """/metrics as the runtime's own exporter writes it."""

    class Local(Collector):
        def collect(self) -> Any:
            return families(series(tally, manager(active, capacity)))

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Local())
    return generate_latest(registry).decode()


def test_a_servers_metrics_read_back() -> None:
    tally = Tally()
    for _ in range(7):
        tally.step(WS_OK, 0.0004)
    tally.refused["capacity",] += 2
    tally.refused["draining",] += 1
    tally.resumed = 5
    got = from_metrics(metrics_text(tally), HEALTH, at=10.0)
    assert (got.sessions, got.capacity, got.detached, got.stuck) == (4, 64, 1, 3)
    assert (got.steps, got.resumed, got.abandoned, got.workers) == (7, 5, 2, 1)
    assert got.refused == {"capacity": 2, "client_cap": 0, "draining": 1}
    assert got.version == __version__
    assert got.status == "healthy"
    assert got.buckets[-1] == (float("inf"), 7.0)
    assert dict(got.buckets)[0.0005] == 7


def test_text_that_is_not_an_openenv_servers_metrics_is_refused() -> None:
    with pytest.raises(ValueError):
        from_metrics("# HELP up Up.\n# TYPE up gauge\nup 1\n", HEALTH, at=0.0)


def test_metrics_off_reads_health() -> None:
    health = {**HEALTH, "active_sessions": 3, "max_sessions": 8, "stuck_threads": 1}
    view = replica_view("http://a", from_health(health, at=1.0))
    assert (view["sessions"], view["capacity"], view["stuck"]) == (3, 8, 1)
    assert view["steps"] is None and view["metrics"] is False


def test_quantiles_interpolate_within_a_bucket() -> None:
    buckets = [(0.001, 0.0), (0.002, 50.0), (0.004, 100.0), (float("inf"), 100.0)]
    assert quantile(0.5, buckets) == pytest.approx(0.002)
    assert quantile(0.25, buckets) == pytest.approx(0.0015)
    assert quantile(0.99, buckets) == pytest.approx(0.00396)
    assert quantile(0.5, [(0.001, 0.0), (float("inf"), 0.0)]) is None
    # past the last finite bound, the histogram knows only that bound
    assert quantile(0.99, [(0.001, 1.0), (float("inf"), 10.0)]) == 0.001


def test_rates_and_latency_cover_the_window_between_two_readings() -> None:
    tally = Tally()
    for _ in range(1000):
        tally.step(WS_OK, 0.03)  # old, slow steps: not in the window
    before = from_metrics(metrics_text(tally), HEALTH, at=100.0)
    for _ in range(400):
        tally.step(WS_OK, 0.0002)
    now = from_metrics(metrics_text(tally), HEALTH, at=102.0)
    view = replica_view("http://a", now, before)
    assert view["steps"] == 1400 and view["steps_per_second"] == pytest.approx(200.0)
    assert 0.0001 < view["step_p50_seconds"] <= 0.00025
    assert 0.0001 < view["step_p99_seconds"] <= 0.00025
    assert view["window_seconds"] == pytest.approx(2.0)
    first = replica_view("http://a", now)  # one reading: totals, no rate
    assert first["steps"] == 1400 and first["steps_per_second"] is None


def test_a_restarted_server_counts_from_zero() -> None:
    assert increase(1000.0, 30.0) == 30.0 and increase(10.0, 30.0) == 20.0
    before = Snapshot(1.0, "healthy", None, 1, 0, 1, 0, 0, steps=500.0, buckets=((1.0, 500.0),))
    now = Snapshot(2.0, "healthy", None, 1, 0, 1, 0, 0, steps=20.0, buckets=((1.0, 20.0),))
    assert window_buckets(before, now) == ((1.0, 20.0),)
    assert replica_view("u", now, before)["steps_per_second"] == pytest.approx(20.0)
