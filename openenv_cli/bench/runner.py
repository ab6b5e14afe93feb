"""Run a benchmark grid against one server and collect a :class:`BenchRun`.

``run_bench(settings, observer)`` is the plain function behind ``openenv bench``: for
every cell of the grid it asks the load generator for the workload, reads the server's
CPU before and after (when the server's pids are known), and tells the observer how far
it got. The whole run stops at ``settings.deadline``, or after a run in which the server
answered most resets or steps with an error (``BenchRun.failure``): measuring a wrong
action measures nothing.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from openenv_cli.bench.target import Target
from openenv_runtime.errors import EnvError
from openenv_runtime.http_reads import read_json

from . import procstat
from .auth import mostly_unauthorized
from .loadgen import LoadGenerator
from .stats import SUCCESS_THRESHOLD, BenchRun, SessionsCell, ThroughputCell, refusal

MODES = ("sessions", "throughput")


@dataclass
class BenchSettings:
    """What to measure and how (already validated by :meth:`check`)."""

    url: str
    mode: str = "sessions"
    transport: str = "ws"
    requests_grid: list[int] = field(default_factory=lambda: [32, 128, 512, 2048])
    wait_grid: list[float] = field(default_factory=lambda: [1.0, 5.0])
    reps: int = 3
    sessions: list[int] = field(default_factory=lambda: [64])
    steps: int = 1000
    timeout: float = 30.0
    deadline: float = 1800.0
    processes: int = 1
    compression: bool = True
    client: str = "lean"
    action: dict[str, Any] = field(default_factory=dict)
    """What every step sends (see ``bench.action``); ``wait`` is added when ``wait_field``."""
    wait_field: bool = True
    action_source: str = "the built-in benchmark action"
    success_threshold: float = SUCCESS_THRESHOLD
    server_pids: list[int] = field(default_factory=list)
    loadgen_cpus: list[int] | None = None
    settle: float = 0.5
    token: str | None = field(default=None, repr=False)
    """The access token (see ``bench.auth``): sent, never recorded or shown."""
    server_capacity: int | None = None
    """Sessions the server holds at once (``max_sessions`` of its ``/health``), when known."""

    def check(self) -> None:
        """Raise ``ValueError`` with a readable message for settings that cannot work."""
        if self.mode not in MODES:
            raise ValueError(f"--mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        Target.parse(self.url, transport=self.transport, timeout=self.timeout, client=self.client)
        if self.mode == "sessions" and (not self.requests_grid or min(self.requests_grid) < 1):
            raise ValueError("--requests-grid needs positive batch sizes, e.g. 32,128,512")
        if self.mode == "throughput" and (
            not self.sessions or min(self.sessions) < 1 or self.steps < 1
        ):
            raise ValueError("--sessions and --steps must be positive")
        if not self.wait_grid or min(self.wait_grid) < 0:
            raise ValueError("--wait-grid needs waits ≥ 0 seconds, e.g. 1.0,5.0")
        if self.reps < 1 or self.processes < 1:
            raise ValueError("--reps and --processes must be at least 1")
        if self.timeout <= 0 or self.deadline <= 0:
            raise ValueError("--timeout and --deadline must be positive")
        if not 0 < self.success_threshold <= 1:
            raise ValueError("the success threshold is a fraction in (0, 1]")

    def target(self) -> Target:
        return Target.parse(
            self.url,
            transport=self.transport,
            timeout=self.timeout,
            compression=self.compression,
            client=self.client,
            action=self.action,
            wait_field=self.wait_field,
            token=self.token,
        )

    def cells(self) -> list[tuple[int, float, int]]:
        """(size, wait, rep) of every run, in order: sizes ascending, repetitions innermost."""
        sizes = self.requests_grid if self.mode == "sessions" else self.sessions
        return [
            (size, wait, rep)
            for wait in self.wait_grid
            for size in sizes
            for rep in range(1, self.reps + 1)
        ]


class Observer(Protocol):
    def cell_started(self, index: int, count: int, label: str, units: int) -> None: ...
    def progress(self, done: int, total: int) -> None: ...
    def cell_finished(self, cell: SessionsCell | ThroughputCell) -> None: ...


class _Silent:
    def cell_started(self, index: int, count: int, label: str, units: int) -> None:
        pass

    def progress(self, done: int, total: int) -> None:
        pass

    def cell_finished(self, cell: SessionsCell | ThroughputCell) -> None:
        pass


def read_health(settings: BenchSettings) -> dict[str, Any] | None:
    """The server's ``/health`` (None when it does not answer with an object)."""
    try:
        return read_json(settings.target().http_url, "/health", token=settings.token, timeout=5)
    except EnvError:
        return None


def adopt_health(settings: BenchSettings, health: dict[str, Any] | None) -> list[str]:
    """Take the capacity, and the pid of a server on this machine, from its ``/health``.

    Returns what to tell the user: where they came from, and every batch the server
    cannot hold at once (its extra sessions are refused, which reads as failures).
    """
    if health is None:
        return ["the server's /health did not answer: its capacity and pid are unknown"]
    lines = []
    per_worker = health.get("max_sessions")
    workers = health.get("workers", 1)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        workers = 1
    if isinstance(per_worker, int) and not isinstance(per_worker, bool):
        settings.server_capacity = capacity = per_worker * workers
        if workers > 1:
            lines.append(
                f"server capacity: {workers} workers × {per_worker:,} sessions = {capacity:,} "
                "sessions at once (from /health; a worker refuses past its own share)"
            )
        else:
            lines.append(f"server capacity: {capacity:,} sessions at once (from /health)")
    pid = health.get("pid")
    if not settings.server_pids and isinstance(pid, int) and procstat.available():
        root = _local_server(settings.url, pid)
        if root is not None:
            settings.server_pids = [root]
            lines.append(f"server pid {root} (from /health): its CPU is measured")
    lines.extend(capacity_notes(settings))
    return lines


def capacity_notes(settings: BenchSettings) -> list[str]:
    """One line when the grid asks for more sessions at once than the server holds."""
    capacity = settings.server_capacity
    sizes = settings.requests_grid if settings.mode == "sessions" else settings.sessions
    over = sorted({size for size in sizes if capacity is not None and size > capacity})
    if not over:
        return []
    return [
        f"batch {', '.join(f'{s:,}' for s in over)} exceeds the server's capacity of "
        f"{capacity:,} sessions: the sessions past {capacity:,} are refused and count as "
        "failures (raise the server's MAX_CONCURRENT_ENVS / --max-concurrent-envs to measure more)"
    ]


def _local_server(url: str, pid: int) -> int | None:
    """The pid whose tree runs the server at ``url``, when it runs on this machine."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if not (host in ("localhost", "::1") or host.startswith("127.")):
        return None
    port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
    return procstat.server_root(pid, port)


def environment_info(settings: BenchSettings, server: str | None = None) -> dict[str, Any]:
    info: dict[str, Any] = {
        "server_capacity": settings.server_capacity,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "server": server or "external (--url)",
        "server_pids": settings.server_pids,
        "loadgen_processes": settings.processes,
        "loadgen_cpus": settings.loadgen_cpus,
    }
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            info["somaxconn"] = int(f.read())
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            info["ephemeral_ports"] = f.read().split()
    except OSError:
        pass
    return info


def _cell_deadline(settings: BenchSettings, wait: float, remaining: float) -> float:
    if settings.mode == "sessions":
        # connect, reset, close bounded by the timeout each, the step by timeout + wait.
        return max(1.0, min(remaining, 4 * settings.timeout + wait + 5))
    return max(1.0, remaining)


def _settle(settings: BenchSettings) -> None:
    """Give the server a moment to finish closing the last run's sessions before the next one."""
    if settings.settle <= 0:
        return
    time.sleep(settings.settle)
    base = settings.target().http_url
    until = time.monotonic() + 10
    while time.monotonic() < until:
        try:
            health = read_json(base, "/health", token=settings.token, timeout=2)
        except EnvError:
            return
        if not health.get("active_sessions"):
            return
        time.sleep(0.2)


def run_bench(
    settings: BenchSettings,
    observer: Observer | None = None,
    server: str | None = None,
    loadgen: LoadGenerator | None = None,
) -> BenchRun:
    """Measure every cell of the grid; returns the run (also when the deadline cut it short)."""
    settings.check()
    observer = observer or _Silent()
    target = settings.target()
    recorded = {k: v for k, v in asdict(settings).items() if k not in ("server_pids", "token")}
    recorded["token"] = settings.token is not None  # whether one was sent, never its value
    run = BenchRun(
        mode=settings.mode,
        url=settings.url,
        transport=settings.transport,
        settings=recorded,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        environment=environment_info(settings, server),
    )
    run.notes.extend(capacity_notes(settings))
    if settings.server_pids and not procstat.available():
        run.notes.append("server CPU unknown: process CPU times cannot be read here")
    pids = settings.server_pids if procstat.available() else []
    started = time.monotonic()
    stop_at = started + settings.deadline
    cells = settings.cells()
    own = loadgen is None
    generator = loadgen or LoadGenerator(settings.processes, settings.loadgen_cpus)
    if own:
        generator.__enter__()
    try:
        for index, (size, wait, rep) in enumerate(cells):
            remaining = stop_at - time.monotonic()
            if remaining <= 1:
                run.notes.append(
                    f"the run deadline ({settings.deadline:g} s) was reached; "
                    f"{len(cells) - index} of {len(cells)} runs were not measured"
                )
                break
            if index:
                _settle(settings)
            deadline = _cell_deadline(settings, wait, remaining)
            label = (
                f"{size:,} sessions, wait {wait:g} s, rep {rep}/{settings.reps}"
                if settings.mode == "sessions"
                else f"{size} sessions × {settings.steps} steps, wait {wait:g} s, rep {rep}/{settings.reps}"
            )
            units = size if settings.mode == "sessions" else size * settings.steps
            observer.cell_started(index, len(cells), label, units)
            before = procstat.tree_cpu_seconds(pids) if pids else None
            overflows = procstat.listen_overflows()
            if settings.mode == "sessions":
                raw = generator.sessions(target, size, wait, deadline, observer.progress)
            else:
                raw = generator.throughput(
                    target, size, settings.steps, wait, deadline, observer.progress
                )
            server_cpu = (
                procstat.cpu_delta(before, procstat.tree_cpu_seconds(pids))
                if before is not None
                else None
            )
            cell: SessionsCell | ThroughputCell
            if settings.mode == "sessions":
                cell = SessionsCell.from_raw(
                    raw, batch=size, wait=wait, rep=rep, server_cpu_s=server_cpu
                )
                after = procstat.listen_overflows()
                if overflows is not None and after is not None:
                    cell.listen_overflows = after - overflows
                run.sessions.append(cell)
            else:
                cell = ThroughputCell.from_raw(
                    raw,
                    sessions=size,
                    steps_per_session=settings.steps,
                    wait=wait,
                    rep=rep,
                    server_cpu_s=server_cpu,
                )
                run.throughput.append(cell)
            observer.cell_finished(cell)
            run.unauthorized = mostly_unauthorized(cell.errors, size)
            if run.unauthorized is not None:
                run.failure = run.unauthorized
                run.notes.append(
                    f"stopped after run {index + 1} of {len(cells)}: "
                    "the server refused the access token (or its absence)"
                )
                break
            run.failure = refusal(cell.errors, cell.error_samples, size)
            if run.failure is not None:
                run.notes.append(
                    f"stopped after run {index + 1} of {len(cells)}: "
                    "the server answered most requests with an error"
                )
                break
    finally:
        if own:
            generator.__exit__(None, None, None)
        run.duration_s = time.monotonic() - started
    if pids:
        run.notes.append(
            "server CPU is the user+system time of the server's process tree "
            f"(pids {', '.join(map(str, pids))} and children), read before and after each run"
        )
    return run
