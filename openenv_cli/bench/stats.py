"""Statistics of benchmark runs: latency summaries, success rates, the max batch, per-run results.

A *cell* is one measured run: one batch size and wait (sessions mode) or one session
count (throughput mode), one repetition. Latencies are kept in milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from statistics import fmean, median, quantiles
from typing import Any

SUCCESS_THRESHOLD = 0.95


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
        """Percentiles linearly interpolated between the nearest ranks (``statistics``' "inclusive" method)."""
        ms = [v * 1000.0 for v in values]
        if not ms:
            return cls()
        if len(ms) == 1:
            return cls(1, ms[0], ms[0], ms[0], ms[0], ms[0])
        cuts = quantiles(ms, n=100, method="inclusive")  # cuts[k - 1] is the k-th percentile
        return cls(len(ms), fmean(ms), cuts[49], cuts[89], cuts[98], max(ms))


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
        current = best.setdefault(point.wait, None)
        if point.success_rate >= threshold and (current is None or point.batch > current):
            best[point.wait] = point.batch
    return best


_NOT_REFUSALS = ("error CAPACITY_REACHED", "HTTP 429", "HTTP 503")


def is_refusal(label: str) -> bool:
    """Whether an error label (or sample) is a reset or step the server answered with an error.

    A bad action or an environment that raises: unlike timeouts, lost connections or a
    full server, no load explains it, and every further run would fail the same way.
    """
    phase, _, what = label.partition(": ")
    if phase not in ("reset", "step") or what.startswith(_NOT_REFUSALS):
        return False
    return what.startswith(("error ", "HTTP ", "unparsable reply", "unexpected reply"))


def refusal(errors: dict[str, int], samples: Sequence[str], attempted: int) -> str | None:
    """The first refused request's sample when at least half of ``attempted`` were refused."""
    refused = sum(count for label, count in errors.items() if is_refusal(label))
    if not refused or refused * 2 < attempted:
        return None
    # a sample is its label, then the reply: the same test applies
    return next((s for s in samples if is_refusal(s)), None) or next(
        label for label in errors if is_refusal(label)
    )


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
    failure: str | None = None
    """Why the run stopped early: the first error the server answered most requests with."""
    unauthorized: str | None = None
    """Set (to the refusal, e.g. ``connect: HTTP 403``) when the server refused the token."""

    @property
    def points(self) -> list[SessionsPoint]:
        return aggregate_sessions(self.sessions)

    @property
    def max_batch(self) -> dict[float, int | None]:
        return max_batch(
            self.points, float(self.settings.get("success_threshold", SUCCESS_THRESHOLD))
        )

    @property
    def cells(self) -> list[SessionsCell | ThroughputCell]:
        """Every measured run, of either mode."""
        return [*self.sessions, *self.throughput]

    @property
    def loadgen_cpu_s(self) -> float:
        return sum(c.loadgen_cpu_s for c in self.cells)

    @property
    def server_cpu_s(self) -> float | None:
        values = [c.server_cpu_s for c in self.cells]
        return (
            None
            if not values or any(v is None for v in values)
            else sum(v for v in values if v is not None)
        )
