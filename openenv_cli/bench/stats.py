"""Statistics of benchmark runs: percentiles, success rates, the max batch, per-run results.

A *cell* is one measured run: one batch size and wait (sessions mode) or one session
count (throughput mode), one repetition. Latencies are kept in milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from statistics import median
from typing import Any

SUCCESS_THRESHOLD = 0.95


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0–100) of already sorted values, linearly interpolated; None if empty."""
    if not sorted_values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    rank = (len(sorted_values) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = rank - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


@dataclass(frozen=True, slots=True)
class Summary:
    """Distribution of one latency, in milliseconds (all None when nothing was measured)."""

    n: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None

    @classmethod
    def of_seconds(cls, values: Iterable[float]) -> Summary:
        ms = sorted(v * 1000.0 for v in values)
        if not ms:
            return cls()
        return cls(
            len(ms),
            sum(ms) / len(ms),
            percentile(ms, 50),
            percentile(ms, 90),
            percentile(ms, 99),
            ms[-1],
        )


def success_rate(ok: int, attempted: int) -> float:
    """``ok / attempted``; 0.0 when nothing was attempted."""
    return ok / attempted if attempted > 0 else 0.0


def _per(numerator: float | None, denominator: float) -> float | None:
    return numerator / denominator if numerator is not None and denominator > 0 else None


@dataclass(slots=True)
class SessionsCell:
    """One run of the sessions workload: ``batch`` sessions at once, each stepping once with ``wait``.

    ``requests_per_s`` counts sessions completed successfully per second of wall time (one
    request = one session: connect, reset, step, close). Phase latencies cover every
    session that completed that phase; ``total`` covers the successful sessions.
    """

    batch: int
    wait: float
    rep: int
    attempted: int
    ok: int
    success_rate: float
    wall_s: float
    requests_per_s: float
    connect: Summary
    reset: Summary
    step: Summary
    total: Summary
    errors: dict[str, int] = field(default_factory=dict)
    error_samples: list[str] = field(default_factory=list)
    loadgen_cpu_s: float = 0.0
    server_cpu_s: float | None = None
    listen_overflows: int | None = None
    """Connections the kernel dropped from a full listen queue during the run (None: unknown)."""

    @classmethod
    def from_raw(
        cls,
        raw: dict[str, Any],
        *,
        batch: int,
        wait: float,
        rep: int,
        server_cpu_s: float | None = None,
    ) -> SessionsCell:
        wall = float(raw.get("wall") or 0.0)
        ok = int(raw.get("ok", 0))
        return cls(
            batch=batch,
            wait=wait,
            rep=rep,
            attempted=int(raw.get("attempted", 0)),
            ok=ok,
            success_rate=success_rate(ok, batch),
            wall_s=wall,
            requests_per_s=ok / wall if wall > 0 else 0.0,
            connect=Summary.of_seconds(raw.get("connect", ())),
            reset=Summary.of_seconds(raw.get("reset", ())),
            step=Summary.of_seconds(raw.get("step", ())),
            total=Summary.of_seconds(raw.get("total", ())),
            errors=dict(raw.get("errors", {})),
            error_samples=list(raw.get("samples", [])),
            loadgen_cpu_s=float(raw.get("cpu", 0.0)),
            server_cpu_s=server_cpu_s,
        )

    @property
    def server_cpu_ms_per_session(self) -> float | None:
        return _per(None if self.server_cpu_s is None else self.server_cpu_s * 1000, self.ok)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["server_cpu_ms_per_session"] = self.server_cpu_ms_per_session
        return data


@dataclass(slots=True)
class ThroughputCell:
    """One run of the throughput workload: ``sessions`` sessions × ``steps_per_session`` back-to-back steps.

    ``steps_per_s`` is the steps completed divided by the window from the first step sent
    to the last reply received (connecting and resetting are outside it).
    """

    sessions: int
    steps_per_session: int
    wait: float
    rep: int
    ok: int
    success_rate: float
    steps: int
    window_s: float
    steps_per_s: float
    step_latency: Summary
    errors: dict[str, int] = field(default_factory=dict)
    error_samples: list[str] = field(default_factory=list)
    loadgen_cpu_s: float = 0.0
    server_cpu_s: float | None = None

    @classmethod
    def from_raw(
        cls,
        raw: dict[str, Any],
        *,
        sessions: int,
        steps_per_session: int,
        wait: float,
        rep: int,
        server_cpu_s: float | None = None,
    ) -> ThroughputCell:
        window = raw.get("window") or []
        span = float(window[1] - window[0]) if len(window) == 2 else 0.0
        steps = int(raw.get("steps", 0))
        ok = int(raw.get("ok", 0))
        return cls(
            sessions=sessions,
            steps_per_session=steps_per_session,
            wait=wait,
            rep=rep,
            ok=ok,
            success_rate=success_rate(ok, sessions),
            steps=steps,
            window_s=span,
            steps_per_s=steps / span if span > 0 else 0.0,
            step_latency=Summary.of_seconds(raw.get("step_latencies", ())),
            errors=dict(raw.get("errors", {})),
            error_samples=list(raw.get("samples", [])),
            loadgen_cpu_s=float(raw.get("cpu", 0.0)),
            server_cpu_s=server_cpu_s,
        )

    @property
    def server_cpu_us_per_step(self) -> float | None:
        return _per(None if self.server_cpu_s is None else self.server_cpu_s * 1e6, self.steps)

    @property
    def loadgen_cpu_us_per_step(self) -> float | None:
        return _per(self.loadgen_cpu_s * 1e6, self.steps)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["server_cpu_us_per_step"] = self.server_cpu_us_per_step
        data["loadgen_cpu_us_per_step"] = self.loadgen_cpu_us_per_step
        return data


@dataclass(frozen=True, slots=True)
class SessionsPoint:
    """The repetitions of one (batch, wait) taken together.

    Success is pooled over every session of every repetition; latencies and rates are
    the median over the repetitions.
    """

    batch: int
    wait: float
    reps: int
    attempted: int
    ok: int
    success_rate: float
    requests_per_s: float
    connect_p50: float | None
    connect_p99: float | None
    reset_p50: float | None
    reset_p99: float | None
    step_p50: float | None
    step_p99: float | None
    total_p50: float | None
    total_p99: float | None


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return median(present) if present else None


def aggregate_sessions(cells: Sequence[SessionsCell]) -> list[SessionsPoint]:
    """One point per (batch, wait), in the order first seen."""
    groups: dict[tuple[int, float], list[SessionsCell]] = {}
    for cell in cells:
        groups.setdefault((cell.batch, cell.wait), []).append(cell)
    points = []
    for (batch, wait), group in groups.items():
        attempted = sum(c.batch for c in group)
        ok = sum(c.ok for c in group)
        points.append(
            SessionsPoint(
                batch=batch,
                wait=wait,
                reps=len(group),
                attempted=attempted,
                ok=ok,
                success_rate=success_rate(ok, attempted),
                requests_per_s=_median(c.requests_per_s for c in group) or 0.0,
                connect_p50=_median(c.connect.p50 for c in group),
                connect_p99=_median(c.connect.p99 for c in group),
                reset_p50=_median(c.reset.p50 for c in group),
                reset_p99=_median(c.reset.p99 for c in group),
                step_p50=_median(c.step.p50 for c in group),
                step_p99=_median(c.step.p99 for c in group),
                total_p50=_median(c.total.p50 for c in group),
                total_p99=_median(c.total.p99 for c in group),
            )
        )
    return points


def max_batch(
    points: Iterable[SessionsPoint], threshold: float = SUCCESS_THRESHOLD
) -> dict[float, int | None]:
    """For each wait, the largest batch whose pooled success over all repetitions is ≥ ``threshold``.

    None for a wait where no batch reached it.
    """
    best: dict[float, int | None] = {}
    for point in points:
        best.setdefault(point.wait, None)
        if point.success_rate >= threshold and (
            best[point.wait] is None or point.batch > best[point.wait]
        ):
            best[point.wait] = point.batch
    return best


def combined_errors(cells: Iterable[SessionsCell | ThroughputCell]) -> dict[str, int]:
    """Failure labels and counts over many cells, most frequent first."""
    total: dict[str, int] = {}
    for cell in cells:
        for label, count in cell.errors.items():
            total[label] = total.get(label, 0) + count
    return dict(sorted(total.items(), key=lambda item: -item[1]))


@dataclass(slots=True)
class BenchRun:
    """Everything one ``openenv bench`` invocation measured, and how."""

    mode: str
    url: str
    transport: str
    settings: dict[str, Any]
    started_at: str
    duration_s: float = 0.0
    environment: dict[str, Any] = field(default_factory=dict)
    sessions: list[SessionsCell] = field(default_factory=list)
    throughput: list[ThroughputCell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def points(self) -> list[SessionsPoint]:
        return aggregate_sessions(self.sessions)

    @property
    def max_batch(self) -> dict[float, int | None]:
        return max_batch(
            self.points, float(self.settings.get("success_threshold", SUCCESS_THRESHOLD))
        )

    @property
    def loadgen_cpu_s(self) -> float:
        return sum(c.loadgen_cpu_s for c in [*self.sessions, *self.throughput])

    @property
    def server_cpu_s(self) -> float | None:
        values = [c.server_cpu_s for c in [*self.sessions, *self.throughput]]
        return (
            None
            if not values or any(v is None for v in values)
            else sum(v for v in values if v is not None)
        )
