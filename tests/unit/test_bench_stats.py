"""Latency summaries, success rates, the max batch and per-run results of ``openenv bench``."""

from __future__ import annotations

import pytest

from openenv_cli.bench.stats import (
    BenchRun,
    SessionsCell,
    Summary,
    ThroughputCell,
    aggregate_sessions,
    combined_errors,
    max_batch,
    success_rate,
)


def sessions_raw(
    ok: int,
    attempted: int,
    totals: list[float] | None = None,
    errors: dict[str, int] | None = None,
    wall: float = 2.0,
) -> dict:
    totals = totals if totals is not None else [1.0] * ok
    return {
        "attempted": attempted,
        "ok": ok,
        "errors": errors or {},
        "samples": [],
        "connect": [0.01] * attempted,
        "reset": [0.002] * ok,
        "step": [1.0] * ok,
        "total": totals,
        "wall": wall,
        "cpu": 0.5,
    }


def cell(batch: int, ok: int, wait: float = 1.0, rep: int = 1, p99_s: float = 1.0) -> SessionsCell:
    return SessionsCell.from_raw(
        sessions_raw(ok, batch, totals=[p99_s] * ok), batch=batch, wait=wait, rep=rep
    )


class TestPercentiles:
    """The figures the hand-written percentile gave, now from ``statistics.quantiles``."""

    def test_interpolates_linearly(self) -> None:
        s = Summary.of_seconds([0.001, 0.002, 0.003, 0.004])
        assert s.p50 == pytest.approx(2.5)
        assert s.p90 == pytest.approx(3.7)
        assert s.p99 == pytest.approx(3.97)
        assert (s.max, s.mean) == (pytest.approx(4.0), pytest.approx(2.5))

    def test_one_value(self) -> None:
        s = Summary.of_seconds([0.007])
        assert s.p50 == s.p99 == s.max == pytest.approx(7.0)

    def test_p99_of_a_hundred_values(self) -> None:
        s = Summary.of_seconds([v / 1000 for v in range(100, 0, -1)])  # any order
        assert s.p99 == pytest.approx(99.01)
        assert s.p50 == pytest.approx(50.5)


class TestSummary:
    def test_converts_seconds_to_milliseconds_and_sorts(self) -> None:
        s = Summary.of_seconds([0.003, 0.001, 0.002])
        assert s.n == 3
        assert s.p50 == pytest.approx(2.0)
        assert s.max == pytest.approx(3.0)
        assert s.mean == pytest.approx(2.0)

    def test_empty(self) -> None:
        assert Summary.of_seconds([]) == Summary()


def test_success_rate() -> None:
    assert success_rate(95, 100) == 0.95
    assert success_rate(0, 0) == 0.0


class TestSessionsCell:
    def test_from_raw(self) -> None:
        c = SessionsCell.from_raw(
            sessions_raw(30, 32, errors={"connect: timeout": 2}, wall=2.0),
            batch=32,
            wait=1.0,
            rep=2,
            server_cpu_s=0.06,
        )
        assert c.success_rate == pytest.approx(30 / 32)
        assert c.requests_per_s == pytest.approx(15.0)
        assert c.total.p50 == pytest.approx(1000.0)
        assert c.connect.n == 32 and c.step.n == 30
        assert c.errors == {"connect: timeout": 2}
        assert c.server_cpu_ms_per_session == pytest.approx(2.0)
        assert c.to_dict()["server_cpu_ms_per_session"] == pytest.approx(2.0)

    def test_success_counts_against_the_batch_even_if_a_worker_lost_sessions(self) -> None:
        raw = sessions_raw(10, 10)  # the workers only reported 10 of 20
        assert SessionsCell.from_raw(raw, batch=20, wait=1.0, rep=1).success_rate == 0.5

    def test_unknown_server_cpu(self) -> None:
        assert cell(8, 8).server_cpu_ms_per_session is None


class TestThroughputCell:
    def test_steps_per_second_over_the_step_window(self) -> None:
        raw = {
            "ok": 4,
            "steps": 4000,
            "window": [10.0, 12.0],
            "step_latencies": [0.001] * 4000,
            "errors": {},
            "cpu": 0.2,
        }
        c = ThroughputCell.from_raw(
            raw, sessions=4, steps_per_session=1000, wait=0.0, rep=1, server_cpu_s=0.24
        )
        assert c.steps_per_s == pytest.approx(2000.0)
        assert c.server_cpu_us_per_step == pytest.approx(60.0)
        assert c.loadgen_cpu_us_per_step == pytest.approx(50.0)
        assert c.step_latency.p50 == pytest.approx(1.0)
        assert c.success_rate == 1.0

    def test_nothing_measured(self) -> None:
        c = ThroughputCell.from_raw(
            {"errors": {"connect: ConnectionRefusedError": 2}},
            sessions=2,
            steps_per_session=10,
            wait=0.0,
            rep=1,
        )
        assert c.steps_per_s == 0.0 and c.success_rate == 0.0
        assert c.server_cpu_us_per_step is None and c.loadgen_cpu_us_per_step is None


class TestAggregateAndMaxBatch:
    def test_success_is_pooled_over_repetitions(self) -> None:
        points = aggregate_sessions(
            [cell(100, 100, rep=1), cell(100, 90, rep=2), cell(100, 96, rep=3)]
        )
        assert len(points) == 1
        assert points[0].reps == 3
        assert points[0].success_rate == pytest.approx(286 / 300)

    def test_latencies_are_the_median_of_repetitions(self) -> None:
        points = aggregate_sessions(
            [
                cell(10, 10, rep=1, p99_s=1.0),
                cell(10, 10, rep=2, p99_s=3.0),
                cell(10, 10, rep=3, p99_s=2.0),
            ]
        )
        assert points[0].total_p99 == pytest.approx(2000.0)

    def test_max_batch_per_wait(self) -> None:
        cells = [
            cell(32, 32),
            cell(128, 128),
            cell(512, 480),
            cell(2048, 1000),
            cell(32, 32, wait=5.0),
            cell(128, 100, wait=5.0),
        ]
        best = max_batch(aggregate_sessions(cells))
        assert best == {1.0: 128, 5.0: 32}

    def test_max_batch_at_exactly_the_threshold_and_none(self) -> None:
        assert max_batch(aggregate_sessions([cell(100, 95)])) == {1.0: 100}
        assert max_batch(aggregate_sessions([cell(100, 94)])) == {1.0: None}
        assert max_batch(aggregate_sessions([cell(100, 94)]), threshold=0.9) == {1.0: 100}

    def test_max_batch_uses_pooled_success(self) -> None:
        # One bad repetition out of three still passes when the pool is >= 95%.
        cells = [cell(100, 100, rep=1), cell(100, 100, rep=2), cell(100, 90, rep=3)]
        assert max_batch(aggregate_sessions(cells)) == {1.0: 100}


def test_combined_errors_most_frequent_first() -> None:
    a = SessionsCell.from_raw(sessions_raw(0, 3, errors={"x": 1, "y": 2}), batch=3, wait=1.0, rep=1)
    b = SessionsCell.from_raw(sessions_raw(0, 3, errors={"x": 3}), batch=3, wait=1.0, rep=2)
    assert list(combined_errors([a, b]).items()) == [("x", 4), ("y", 2)]


def test_bench_run_cpu_totals() -> None:
    run = BenchRun(
        mode="sessions", url="http://127.0.0.1:1", transport="ws", settings={}, started_at="now"
    )
    run.sessions = [cell(8, 8), cell(8, 8)]
    assert run.loadgen_cpu_s == pytest.approx(1.0)
    assert run.server_cpu_s is None
    run.sessions[0].server_cpu_s = run.sessions[1].server_cpu_s = 0.25
    assert run.server_cpu_s == pytest.approx(0.5)
    assert run.max_batch == {1.0: 8}
