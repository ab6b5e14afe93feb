"""The metrics module: plain counts, their Prometheus families, and the multiprocess files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from openenv_runtime import create_app
from openenv_runtime.server.metrics import (
    LATENCY_BUCKETS,
    WS_DONE,
    WS_OK,
    Exporter,
    Latency,
    Tally,
    families,
    forget_worker,
    series,
)
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


class _Registry:
    """What the exporter reads of a session registry, for a worker holding nothing."""

    def __init__(self) -> None:
        self.sessions: dict[str, object] = {}
        self.warm: list[object] = []

    detached = 0
    capacity = 8
    abandoned = 0

    class runner:
        stuck_threads = 0


def test_latency_buckets_are_upper_bounds_inclusive() -> None:
    latency = Latency()
    latency.observe(LATENCY_BUCKETS[0])  # exactly on a bound: that bucket (le is "at most")
    latency.observe(LATENCY_BUCKETS[0] * 1.01)
    latency.observe(10_000.0)  # past the last bound: +Inf
    cumulative = dict(latency.cumulative())
    assert cumulative["0.0001"] == 1
    assert cumulative["0.00025"] == 2
    assert cumulative["+Inf"] == 3
    assert latency.total == LATENCY_BUCKETS[0] * 2.01 + 10_000.0


def test_families_say_what_the_tally_counted() -> None:
    tally = Tally()
    for _ in range(5):
        tally.step(WS_OK, 0.001)
    tally.step(WS_DONE, 0.002)
    tally.reset("ws", True, 0.01)
    tally.opened["ws",] += 2
    tally.refused["capacity",] += 1
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()

    class Source:
        def collect(self):  # type: ignore[no-untyped-def]
            return families(series(tally))

    registry.register(Source())  # type: ignore[arg-type]
    got = samples(generate_latest(registry).decode())
    assert got["openenv_steps_total", (("outcome", "ok"), ("transport", "ws"))] == 5
    assert got["openenv_steps_total", (("outcome", "done"), ("transport", "ws"))] == 1
    assert got["openenv_step_duration_seconds_count", ()] == 6
    assert got["openenv_resets_total", (("outcome", "ok"), ("transport", "ws"))] == 1
    assert got["openenv_sessions_opened_total", (("transport", "ws"),)] == 2
    assert got["openenv_sessions_refused_total", (("reason", "capacity"),)] == 1


def test_every_worker_file_adds_up_in_the_shared_folder(tmp_path: Path) -> None:
    tally = Tally()
    tally.step(WS_OK, 0.001)
    tally.opened["ws",] += 1
    exporter = Exporter(tally, _Registry(), str(tmp_path))  # type: ignore[arg-type]
    # another worker's file, as that worker would have written it
    other = Tally()
    for _ in range(3):
        other.step(WS_OK, 0.02)
    other.opened["ws",] += 2
    writer = Exporter(other, _Registry(), str(tmp_path))  # type: ignore[arg-type]
    pid = os.getpid()
    writer.flush()
    writer.close()
    for written in tmp_path.iterdir():
        written.rename(tmp_path / written.name.replace(f"_{pid}-", "_999999-"))
    got = samples(exporter.render().decode())
    assert got["openenv_steps_total", (("outcome", "ok"), ("transport", "ws"))] == 4
    assert got["openenv_sessions_opened_total", (("transport", "ws"),)] == 3
    assert got["openenv_step_duration_seconds_count", ()] == 4
    assert got["openenv_step_duration_seconds_bucket", (("le", "0.001"),)] == 1
    assert got["openenv_step_duration_seconds_bucket", (("le", "0.025"),)] == 4
    assert got["openenv_sessions_capacity", ()] == 16  # a gauge: summed over live workers
    assert sum(v for (name, _), v in got.items() if name == "openenv_workers") == 2
    # counts written again are totals, not added twice
    tally.step(WS_OK, 0.001)
    got = samples(exporter.render().decode())
    assert got["openenv_steps_total", (("outcome", "ok"), ("transport", "ws"))] == 5
    # a dead worker's gauges go, its counts stay
    forget_worker(str(tmp_path), 999999)
    got = samples(exporter.render().decode())
    assert got["openenv_sessions_capacity", ()] == 8
    assert sum(v for (name, _), v in got.items() if name == "openenv_workers") == 1
    assert got["openenv_steps_total", (("outcome", "ok"), ("transport", "ws"))] == 5
    exporter.close()


def test_http_sessions_steps_and_refusals_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_CONCURRENT_ENVS", "1")
    app = create_app(EchoEnvironment, EchoAction, EchoObservation)
    with TestClient(app) as client:
        opened = client.post("/reset", json={})
        session = opened.json()["session_id"]
        for _ in range(3):
            stepped = client.post("/step", json={"session_id": session, "action": {"message": "x"}})
            assert stepped.status_code == 200
        bad = client.post("/step", json={"session_id": session, "action": {"message": 1}})
        assert bad.status_code == 422
        assert client.post("/reset", json={}).status_code == 503  # full: refused, not opened
        got = samples(client.get("/metrics").text)
    assert got["openenv_steps_total", (("outcome", "ok"), ("transport", "http"))] == 3
    assert got["openenv_steps_total", (("outcome", "invalid"), ("transport", "http"))] == 1
    assert got["openenv_step_duration_seconds_count", ()] == 3
    assert got["openenv_resets_total", (("outcome", "ok"), ("transport", "http"))] == 1
    assert got["openenv_sessions_opened_total", (("transport", "http"),)] == 1
    assert got["openenv_sessions_refused_total", (("reason", "capacity"),)] == 1
    assert got["openenv_sessions_active", (("transport", "http"),)] == 1
    assert got["openenv_warm_pool_total", (("result", "miss"),)] == 1


def test_step_times_folded_later_land_in_the_buckets_observe_gives() -> None:
    times = [LATENCY_BUCKETS[0], LATENCY_BUCKETS[0] * 1.01, 0.0, 0.003, 0.003, 0.7, 50.0] * 900
    tally, one_by_one = Tally(), Latency()
    for seconds in times:  # more than PENDING_MAX: folds on the way and when read
        tally.step(WS_OK, seconds)
        one_by_one.observe(seconds)
    assert len(tally.pending) < len(times)
    tally.settle()
    assert tally.pending == []
    assert tally.step_latency.counts == one_by_one.counts
    assert tally.step_latency.total == pytest.approx(one_by_one.total)
    assert tally.steps[WS_OK] == len(times)
