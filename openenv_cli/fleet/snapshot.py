"""One replica's numbers at one moment, and what two moments say (steps/s, step p50/p99).

The numbers come from the server's ``/metrics`` (``openenv_runtime.server.metrics``), parsed
with ``prometheus_client``'s own parser: there every worker's totals are summed, so a server
run with ``--workers N`` reads as one. ``/health`` answers from whichever worker took the
request; it gives the status (healthy or draining), and stands in for the sessions and the
capacity when the server runs with metrics off.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

STEP_LATENCY = "openenv_step_duration_seconds"


@dataclass(frozen=True)
class Snapshot:
    """What one replica said at ``at`` (a ``time.monotonic()`` reading).

    Counters (``steps``, ``refused``, ``resumed``, ``abandoned``) are totals since the server
    started; ``buckets`` is the step latency histogram, cumulative, as ``(le, count)`` pairs.
    The counters are None when the server runs without metrics.
    """

    at: float
    status: str
    version: str | None
    workers: int | None
    sessions: int
    capacity: int
    detached: int
    stuck: int
    steps: float | None = None
    refused: Mapping[str, float] = field(default_factory=dict)
    resumed: float | None = None
    abandoned: float | None = None
    buckets: tuple[tuple[float, float], ...] = ()


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def from_health(health: Mapping[str, Any], at: float) -> Snapshot:
    """A snapshot from ``/health`` alone (metrics off): the answering worker's sessions and slots."""
    version = health.get("runtime_version")
    return Snapshot(
        at=at,
        status=str(health.get("status", "unknown")),
        version=str(version) if version is not None else None,
        workers=_int(health.get("workers")) or None,
        sessions=_int(health.get("active_sessions")),
        capacity=_int(health.get("max_sessions")),
        detached=_int(health.get("detached_sessions")),
        stuck=_int(health.get("stuck_threads")),
    )


def from_metrics(text: str, health: Mapping[str, Any], at: float) -> Snapshot:
    """A snapshot from the text of ``/metrics`` (and ``/health`` for the status).

    Raises ``ValueError`` when ``text`` is not the Prometheus text format.
    """
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, float] = {}
    refused: dict[str, float] = {}
    buckets: dict[float, float] = {}
    versions: list[str] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name, value = sample.name, float(sample.value)
            if name == STEP_LATENCY + "_bucket":
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + value
                continue
            totals[name] = totals.get(name, 0.0) + value
            if name == "openenv_sessions_refused_total":
                reason = sample.labels.get("reason", "")
                refused[reason] = refused.get(reason, 0.0) + value
            elif name == "openenv_workers" and value > 0 and "version" in sample.labels:
                versions.append(sample.labels["version"])
    if "openenv_sessions_active" not in totals:
        raise ValueError("no openenv_sessions_active sample: not an OpenEnv server's /metrics")
    return Snapshot(
        at=at,
        status=str(health.get("status", "unknown")),
        # every worker's version: more than one while a rolling restart is under way
        version=", ".join(sorted(set(versions))) or None,
        workers=int(totals["openenv_workers"]) if "openenv_workers" in totals else None,
        sessions=int(totals["openenv_sessions_active"]),
        capacity=int(totals.get("openenv_sessions_capacity", 0)),
        detached=int(totals.get("openenv_sessions_detached", 0)),
        stuck=int(totals.get("openenv_stuck_threads", 0)),
        steps=totals.get("openenv_steps_total", 0.0),
        refused=refused,
        resumed=totals.get("openenv_sessions_resumed_total", 0.0),
        abandoned=totals.get("openenv_steps_abandoned_total", 0.0),
        buckets=tuple(sorted(buckets.items())),
    )


def increase(before: float, now: float) -> float:
    """How much a counter grew; a counter that went down was reset (the server restarted), so
    all of ``now`` is new."""
    return now - before if now >= before else now


def quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The ``q`` quantile (0..1) of a cumulative histogram's ``(le, count)`` pairs, interpolated
    linearly inside its bucket (the first bucket starts at 0); None when it holds nothing.

    An answer in the ``+Inf`` bucket is the highest finite bound: the histogram knows no more.
    """
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank and count > below:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def window_buckets(before: Snapshot, now: Snapshot) -> tuple[tuple[float, float], ...]:
    """The histogram of the steps answered between two snapshots (bucket by bucket)."""
    earlier = dict(before.buckets)
    return tuple((bound, increase(earlier.get(bound, 0.0), count)) for bound, count in now.buckets)


def replica_view(url: str, now: Snapshot, before: Snapshot | None = None) -> dict[str, Any]:
    """One replica as ``openenv top --json`` prints it.

    ``steps``, ``refused``, ``resumed`` and ``abandoned`` are totals since the server started;
    ``steps_per_second`` and the step latency quantiles cover the window since ``before``
    (None without it, without metrics, or when no step was answered in it).
    """
    rate = p50 = p99 = window = None
    if before is not None and now.steps is not None and before.steps is not None:
        window = now.at - before.at
        if window > 0:
            rate = increase(before.steps, now.steps) / window
        steps = window_buckets(before, now)
        p50, p99 = quantile(0.5, steps), quantile(0.99, steps)
    return {
        "url": url,
        "status": now.status,
        "version": now.version,
        "workers": now.workers,
        "sessions": now.sessions,
        "capacity": now.capacity,
        "detached": now.detached,
        "steps": None if now.steps is None else int(now.steps),
        "steps_per_second": rate,
        "step_p50_seconds": p50,
        "step_p99_seconds": p99,
        "window_seconds": window,
        "refused": None if now.steps is None else int(sum(now.refused.values())),
        "refused_by_reason": {k: int(v) for k, v in sorted(now.refused.items())},
        "resumed": None if now.resumed is None else int(now.resumed),
        "stuck": now.stuck,
        "abandoned": None if now.abandoned is None else int(now.abandoned),
        "metrics": now.steps is not None,
    }


def down_view(url: str, error: str) -> dict[str, Any]:
    """A replica that could not be read: its URL and why."""
    return {"url": url, "error": error}
