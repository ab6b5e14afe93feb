"""The scaling study in one call: deploy the project on each infrastructure, run the sessions
grid against it, take it down, and collect the results for :mod:`.study_report`.

Each infrastructure is reached the way a user would reach it, through the CLI:

* ``local``: ``openenv serve`` on a free 127.0.0.1 port (stopped by its process id);
* ``docker``: ``openenv build``, then one container of that image (removed by its id);
* ``swarm``: ``openenv deploy swarm --apply`` (removed by its stack name);

  both reached through the kernel's NAT rather than the engine's userland proxy where this
  machine allows it (:mod:`.study_net` says why);
* ``slurm``: ``openenv deploy slurm --apply`` (cancelled by its job id).

An infrastructure that is not there (no engine, no swarm, no ``sinfo``) is skipped with the
reason; one that fails to deploy is reported as failed with the error, and the study goes on.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .runner import BenchSettings, Observer, run_bench
from .study_deploy import (
    Deployment,
    StudySettings,
    build_image,
    deploy,
    unavailable_reason,
)

__all__ = ["INFRAS", "InfraOutcome", "StudyResult", "StudySettings", "parse_infras", "run_study"]

INFRAS = ("local", "docker", "swarm", "slurm")
HOW = {
    "local": "openenv serve (uvicorn), 127.0.0.1",
    "docker": "openenv build + one container",
    "swarm": "openenv deploy swarm --apply (replicas behind Envoy)",
    "slurm": "openenv deploy slurm --apply (one server per task, Envoy on the first node)",
}


@dataclass
class InfraOutcome:
    """One infrastructure's part of the study."""

    name: str
    status: str  # measured, skipped or failed
    reason: str = ""
    how: str = ""
    handle: str = ""  # what it was taken down by: pid, container id, stack name, job id
    cores: int | None = None
    points: list[dict[str, Any]] = field(default_factory=list)
    """``SessionsPoint`` of each (batch, wait) as a dict (latencies in ms)."""
    notes: list[str] = field(default_factory=list)
    duration_s: float = 0.0


@dataclass
class StudyResult:
    """Everything the report is built from."""

    started_at: str
    project: str
    settings: dict[str, Any]
    machine: dict[str, Any]
    infras: list[InfraOutcome]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_infras(text: str) -> list[str]:
    """``local,docker`` → ``["local", "docker"]``; raises ``ValueError`` on an unknown name."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in INFRAS]
    if unknown or not names:
        raise ValueError(
            f"--study takes a comma-separated list of {', '.join(INFRAS)} "
            f"(got {', '.join(unknown) or 'nothing'})"
        )
    return list(dict.fromkeys(names))


# --- the study --------------------------------------------------------------------------------


def measure(
    settings: StudySettings, deployment: Deployment, observer: Observer | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The sessions grid against one deployment: its points and notes."""
    from .action import resolve_action

    step = resolve_action(
        action=settings.action,
        action_file=settings.action_file,
        serve=False,
        base_url=deployment.url,
        project_dir=settings.project_dir,
        token=settings.token,
    )
    bench = BenchSettings(
        url=deployment.url,
        mode="sessions",
        requests_grid=list(settings.requests_grid),
        wait_grid=list(settings.wait_grid),
        reps=settings.reps,
        timeout=settings.timeout,
        deadline=settings.deadline,
        processes=settings.processes,
        action=dict(step.value),
        wait_field=step.wait_field,
        action_source=step.source,
        server_pids=list(deployment.server_pids),
        token=settings.token,
    )
    run = run_bench(bench, observer)
    notes = [n for n in run.notes if not n.startswith("server CPU is")]
    if not step.wait_field and any(w > 0 for w in settings.wait_grid):
        notes.append("the action has no `wait` field: steps did not wait")
    if run.failure:
        notes.append(f"stopped: {run.failure}")
    points = []
    for point in run.points:
        errors: dict[str, int] = {}
        for cell in run.sessions:
            if (cell.batch, cell.wait) == (point.batch, point.wait):
                for label, count in cell.errors.items():
                    errors[label] = errors.get(label, 0) + count
        points.append(asdict(point) | {"errors": errors})
    return points, notes


def run_study(
    settings: StudySettings,
    observer: Observer | None = None,
    announce: Callable[[str], None] = lambda _: None,
) -> StudyResult:
    """Deploy, measure and take down each infrastructure in turn; never leaves one running."""
    result = StudyResult(
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        project=settings.project_dir.name,
        settings={
            "infras": settings.infras,
            "requests_grid": settings.requests_grid,
            "wait_grid": settings.wait_grid,
            "reps": settings.reps,
            "timeout": settings.timeout,
            "replicas": settings.replicas,
        },
        machine={"cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]},
        infras=[],
    )
    image: str | None = None
    with tempfile.TemporaryDirectory(prefix="openenv-study-") as tmp:
        for infra in settings.infras:
            outcome = InfraOutcome(infra, "skipped", how=HOW[infra])
            result.infras.append(outcome)
            reason = unavailable_reason(infra)
            if reason is not None:
                outcome.reason = reason
                announce(f"{infra}: skipped ({reason})")
                continue
            started = time.monotonic()
            announce(f"{infra}: deploying ({HOW[infra]})")
            try:
                if infra in ("docker", "swarm") and image is None:
                    image = build_image(settings)
                with deploy(infra, settings, image or "", Path(tmp)) as deployment:
                    outcome.handle, outcome.cores = deployment.handle, deployment.cores
                    announce(f"{infra}: measuring {deployment.url} ({deployment.handle})")
                    outcome.notes = list(deployment.notes)
                    outcome.points, notes = measure(settings, deployment, observer)
                    outcome.notes += notes
                outcome.status = "measured"
                announce(f"{infra}: taken down ({outcome.handle})")
            except Exception as exc:  # one infrastructure failing must not end the study
                outcome.status, outcome.reason = "failed", str(exc) or type(exc).__name__
                announce(f"{infra}: failed ({outcome.reason})")
            outcome.duration_s = round(time.monotonic() - started, 1)
    return result
