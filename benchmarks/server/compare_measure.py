"""The measurements of ``compare.py``: its plan, the servers, meters, workloads, and the run over them all."""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# first, even when an editable install already lists it after site-packages (whose
# stray `tests` package would win)
sys.path.insert(0, str(ROOT))

from openenv_cli.bench import procstat  # noqa: E402
from openenv_cli.bench.loadgen import LoadGenerator  # noqa: E402
from openenv_cli.bench.server import (  # noqa: E402
    BENCH_ENV,
    ServerProcess,
    bench_server,
    free_port,
    pin_tree,
    serve_command,
)
from openenv_cli.bench.stats import SUCCESS_THRESHOLD, SessionsCell, ThroughputCell  # noqa: E402
from openenv_cli.bench.target import Target  # noqa: E402
from openenv_runtime.http_reads import read_json  # noqa: E402

SERVERS = ("reference", "ours", "floor")
METRICS = ("memory", "latency", "throughput", "sessions", "concurrency")
RESULTS = ROOT / "benchmarks" / "results"


@dataclass
class Plan:
    servers: list[str]
    metrics: list[str]
    quick: bool
    workers: int
    throughput_sessions: int = 64
    throughput_steps: int = 500
    throughput_reps: int = 3
    latency_steps: int = 2000
    latency_reps: int = 3
    sessions_batch: int = 2048
    sessions_wait: float = 1.0
    sessions_reps: int = 3
    ladder: list[int] = field(default_factory=lambda: [4096, 8192, 16384])
    idle_sessions: int = 1000
    timeout: float = 30.0
    ladder_deadline: float = 150.0
    deadline: float = 3600.0
    pin: bool = True
    loadgen_processes: int = 2
    compression: bool = True
    client: str = "lean"
    no_latest: bool = False
    wait_quiet: float = 0.0
    results_dir: Path = RESULTS


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- servers ----------------------------------------------------------------------------------


def make_server(name: str, workers: int) -> ServerProcess:
    if name == "ours":
        return bench_server(workers=workers)
    port = free_port()
    if name in ("floor", "floor-inline"):
        app = "floor_app:app" if name == "floor" else "floor_app:inline_app"
        argv = serve_command(app, port, workers, app_dir=str(ROOT / "benchmarks" / "server"))
        return ServerProcess(argv, port, env=dict(BENCH_ENV), name=name)
    from tests.support.reference import SCRIPTS_DIR, SERVER_SCRIPT, reference_python

    argv = [
        str(reference_python()),
        str(SERVER_SCRIPT),
        "--env",
        "bench",
        "--port",
        str(port),
        "--max-concurrent-envs",
        "20000",
        "--workers",
        str(workers),
    ]
    return ServerProcess(argv, port, name="reference", cwd=str(SCRIPTS_DIR))


class Meter:
    """CPU of the server tree, of the load generator, and of the whole machine over one phase."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids

    def __enter__(self) -> Meter:
        self.server0 = procstat.tree_cpu_seconds(self.pids)
        self.machine0 = procstat.MachineCpu.read()
        self.overflows0 = procstat.listen_overflows()
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server_cpu = procstat.cpu_delta(self.server0, procstat.tree_cpu_seconds(self.pids))
        self.machine_cpu = procstat.MachineCpu.read().busy_since(self.machine0)
        self.wall = time.monotonic() - self.t0
        after = procstat.listen_overflows()
        self.listen_overflows = (
            None if after is None or self.overflows0 is None else after - self.overflows0
        )

    def other_cores(self, loadgen_cpu: float) -> float:
        """Average cores used by everything else on the machine during the phase."""
        return (
            max(0.0, self.machine_cpu - self.server_cpu - loadgen_cpu) / self.wall
            if self.wall > 0
            else 0.0
        )


def _settle(url: str, seconds: float = 1.0) -> None:
    time.sleep(seconds)
    until = time.monotonic() + 15
    while time.monotonic() < until:
        try:
            health = read_json(url, "/health", timeout=2)
        except Exception:
            return
        if not isinstance(health, dict) or not health.get("active_sessions"):
            return
        time.sleep(0.2)


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


# --- the measurements -------------------------------------------------------------------------


def measure_memory(
    plan: Plan, server: ServerProcess, target: Target, lg: LoadGenerator
) -> dict[str, Any]:
    lg.sessions(target, 16, 0.0, 60)  # warm-up: imports and first-use allocations happen now
    _settle(server.url)
    base_rss = procstat.tree_rss_bytes(server.pids)
    base_threads = procstat.thread_count(server.pids)
    with lg.idle(target, plan.idle_sessions, deadline=120) as opened:
        time.sleep(1.0)
        rss = 0
        for _ in range(3):  # the peak of a few readings: the server may still be settling
            rss = max(rss, procstat.tree_rss_bytes(server.pids))
            time.sleep(0.2)
        threads = procstat.thread_count(server.pids)
    per_session = (rss - base_rss) / opened if opened else None
    return {
        "idle_sessions": opened,
        "baseline_rss_mb": base_rss / 2**20,
        "rss_mb": rss / 2**20,
        "kb_per_idle_session": per_session / 1024 if per_session is not None else None,
        "baseline_threads": base_threads,
        "threads_with_idle_sessions": threads,
    }


def _throughput_cell(
    server: ServerProcess, target: Target, lg: LoadGenerator, sessions: int, steps: int, rep: int
) -> tuple[ThroughputCell, float]:
    _settle(server.url, 0.3)
    with Meter(server.pids) as meter:
        raw = lg.throughput(target, sessions, steps, 0.0, 120)
    cell = ThroughputCell.from_raw(
        raw,
        sessions=sessions,
        steps_per_session=steps,
        wait=0.0,
        rep=rep,
        server_cpu_s=meter.server_cpu,
    )
    return cell, meter.other_cores(cell.loadgen_cpu_s)


def summarize_throughput(cells: list[tuple[ThroughputCell, float]]) -> dict[str, Any]:
    first = cells[0][0]
    return {
        "sessions": first.sessions,
        "steps_per_session": first.steps_per_session,
        "reps": len(cells),
        "steps_per_s": _median([c.steps_per_s for c, _ in cells]),
        "server_cpu_us_per_step": _median([c.server_cpu_us_per_step for c, _ in cells]),
        "loadgen_cpu_us_per_step": _median([c.loadgen_cpu_us_per_step for c, _ in cells]),
        "step_p50_ms": _median([c.step_latency.p50 for c, _ in cells]),
        "step_p99_ms": _median([c.step_latency.p99 for c, _ in cells]),
        "success": min(c.success_rate for c, _ in cells),
        "other_cores": max(o for _, o in cells),
        # Share of one core each side used during the step window: near 1.0 means that side was the limit.
        "server_core_share": _median(
            [(c.server_cpu_s or 0) / c.window_s if c.window_s else None for c, _ in cells]
        ),
        "loadgen_core_share": _median(
            [c.loadgen_cpu_s / c.window_s if c.window_s else None for c, _ in cells]
        ),
        "runs": [c.to_dict() for c, _ in cells],
    }


def summarize_latency(cells: list[tuple[ThroughputCell, float]]) -> dict[str, Any]:
    return {
        "steps": cells[0][0].steps_per_session,
        "reps": len(cells),
        "rtt_p50_ms": _median([c.step_latency.p50 for c, _ in cells]),
        "rtt_p99_ms": _median([c.step_latency.p99 for c, _ in cells]),
        "server_cpu_us_per_step": _median([c.server_cpu_us_per_step for c, _ in cells]),
        "loadgen_cpu_us_per_step": _median([c.loadgen_cpu_us_per_step for c, _ in cells]),
        "other_cores": max(o for _, o in cells),
        "runs": [c.to_dict() for c, _ in cells],
    }


def measure_per_step(
    plan: Plan,
    servers: dict[str, ServerProcess],
    results: dict[str, dict[str, Any]],
    stop_at: float,
) -> None:
    """Latency and throughput of every server, interleaved (A B C, B C A, ...) so drift hits all alike."""
    wanted = [m for m in ("latency", "throughput") if m in plan.metrics]
    if not wanted or not servers:
        return
    pinned = plan.pin and (os.cpu_count() or 1) >= 2
    for server in servers.values():
        pin_tree(server.pids, [0] if pinned else list(range(os.cpu_count() or 1)))
    targets = {
        n: Target.parse(
            s.url, timeout=plan.timeout, compression=plan.compression, client=plan.client
        )
        for n, s in servers.items()
    }
    cells: dict[tuple[str, str], list[tuple[ThroughputCell, float]]] = {}
    shape = {
        "latency": (1, plan.latency_steps),
        "throughput": (plan.throughput_sessions, plan.throughput_steps),
    }
    reps = {"latency": plan.latency_reps, "throughput": plan.throughput_reps}
    names = list(servers)
    with LoadGenerator(1, [1] if pinned else None) as lg:
        for name in names:  # warm-up, not measured
            for metric in wanted:
                sessions, steps = shape[metric]
                lg.throughput(targets[name], sessions, max(10, steps // 10), 0.0, 60)
        for rep in range(max(reps[m] for m in wanted)):
            order = names[rep % len(names) :] + names[: rep % len(names)]
            for metric in wanted:
                if rep >= reps[metric]:
                    continue
                for name in order:
                    if time.monotonic() >= stop_at:
                        break
                    sessions, steps = shape[metric]
                    log(f"  {name}: {metric} rep {rep + 1}")
                    cell = _throughput_cell(
                        servers[name], targets[name], lg, sessions, steps, rep + 1
                    )
                    cells.setdefault((name, metric), []).append(cell)
    for (name, metric), measured in cells.items():
        results[name][metric] = (
            summarize_latency if metric == "latency" else summarize_throughput
        )(measured)


def _sessions_cell(
    plan: Plan,
    server: ServerProcess,
    target: Target,
    lg: LoadGenerator,
    batch: int,
    rep: int,
    deadline: float,
) -> tuple[SessionsCell, float]:
    _settle(server.url)
    with Meter(server.pids) as meter:
        raw = lg.sessions(target, batch, plan.sessions_wait, deadline)
    cell = SessionsCell.from_raw(
        raw, batch=batch, wait=plan.sessions_wait, rep=rep, server_cpu_s=meter.server_cpu
    )
    cell.listen_overflows = meter.listen_overflows
    log(
        f"    {batch:>6,} sessions: {cell.success_rate * 100:5.1f}% ok, total p99 "
        f"{(cell.total.p99 or 0) / 1000:.2f} s, listen-queue overflows {meter.listen_overflows}"
        + (f", failures {dict(list(cell.errors.items())[:3])}" if cell.errors else "")
    )
    return cell, meter.other_cores(cell.loadgen_cpu_s)


def _summarize_cells(cells: list[tuple[SessionsCell, float]]) -> dict[str, Any]:
    attempted = sum(c.batch for c, _ in cells)
    return {
        "batch": cells[0][0].batch,
        "wait": cells[0][0].wait,
        "reps": len(cells),
        "success": sum(c.ok for c, _ in cells) / attempted if attempted else 0.0,
        "total_p50_ms": _median([c.total.p50 for c, _ in cells]),
        "total_p99_ms": _median([c.total.p99 for c, _ in cells]),
        "connect_p99_ms": _median([c.connect.p99 for c, _ in cells]),
        "step_p99_ms": _median([c.step.p99 for c, _ in cells]),
        "requests_per_s": _median([c.requests_per_s for c, _ in cells]),
        "server_cpu_ms_per_session": _median([c.server_cpu_ms_per_session for c, _ in cells]),
        "loadgen_cpu_s": sum(c.loadgen_cpu_s for c, _ in cells),
        "other_cores": max(o for _, o in cells),
        "listen_overflows": max((c.listen_overflows or 0) for c, _ in cells),
        "errors": {k: v for c, _ in cells for k, v in c.errors.items()},
    }


def measure_sessions(
    plan: Plan, server: ServerProcess, target: Target, lg: LoadGenerator
) -> dict[str, Any]:
    deadline = 4 * plan.timeout + plan.sessions_wait + 5
    cells = [
        _sessions_cell(plan, server, target, lg, plan.sessions_batch, rep, deadline)
        for rep in range(1, plan.sessions_reps + 1)
    ]
    return _summarize_cells(cells)


def measure_concurrency(
    plan: Plan,
    server: ServerProcess,
    target: Target,
    lg: LoadGenerator,
    known: dict[str, Any] | None,
) -> dict[str, Any]:
    """Climb the ladder until a batch falls below 95% success (one repetition each)."""
    steps: list[dict[str, Any]] = []
    passed: int | None = None
    failed: int | None = None
    if known is not None:
        steps.append(
            {
                "batch": known["batch"],
                "success": known["success"],
                "total_p99_ms": known["total_p99_ms"],
            }
        )
        if known["success"] >= SUCCESS_THRESHOLD:
            passed = known["batch"]
        else:
            failed = known["batch"]
    for batch in plan.ladder:
        if failed is not None or (passed is not None and batch <= passed):
            continue
        last = steps[-1] if steps else None
        if plan.quick and last is not None and last.get("total_p99_ms"):
            # Quick runs skip a step that a linear extrapolation says cannot finish within the timeouts.
            predicted = last["total_p99_ms"] / 1000 * batch / last["batch"]
            if predicted > 1.5 * plan.timeout:
                steps.append(
                    {
                        "batch": batch,
                        "skipped": f"predicted total p99 ≈ {predicted:.0f} s from "
                        f"{last['batch']:,} sessions (quick run)",
                    }
                )
                log(f"    {batch:>6,} sessions: skipped (predicted total p99 ≈ {predicted:.0f} s)")
                break
        cell, other = _sessions_cell(plan, server, target, lg, batch, 1, plan.ladder_deadline)
        steps.append(
            {
                "batch": batch,
                "success": cell.success_rate,
                "total_p99_ms": cell.total.p99,
                "connect_p99_ms": cell.connect.p99,
                "errors": cell.errors,
                "other_cores": other,
                "listen_overflows": cell.listen_overflows,
                "server_cpu_ms_per_session": cell.server_cpu_ms_per_session,
            }
        )
        if cell.success_rate >= SUCCESS_THRESHOLD:
            passed = batch
        else:
            failed = batch
    skipped = [s["batch"] for s in steps if "skipped" in s]
    return {"max_sessions": passed, "first_failed": failed, "not_tried": skipped, "ladder": steps}


def measure_alone(
    plan: Plan, name: str, server: ServerProcess, result: dict[str, Any], stop_at: float
) -> None:
    """Memory (pinned), then the sessions and concurrency runs (unpinned), one server at a time."""
    base = Target.parse(
        server.url, timeout=plan.timeout, compression=plan.compression, client=plan.client
    )
    pinned = plan.pin and (os.cpu_count() or 1) >= 2
    if "memory" in plan.metrics and time.monotonic() < stop_at:
        pin_tree(server.pids, [0] if pinned else list(range(os.cpu_count() or 1)))
        with LoadGenerator(1, [1] if pinned else None) as lg:
            log(f"  {name}: memory")
            result["memory"] = measure_memory(plan, server, base, lg)
    pin_tree(server.pids, list(range(os.cpu_count() or 1)))
    if not {"sessions", "concurrency"} & set(plan.metrics):
        return
    if plan.wait_quiet > 0:
        wait_for_quiet(min(plan.wait_quiet, max(0.0, stop_at - time.monotonic())))
    with LoadGenerator(plan.loadgen_processes) as lg:
        if "sessions" in plan.metrics and time.monotonic() < stop_at:
            log(f"  {name}: sessions ({plan.sessions_batch:,} at wait {plan.sessions_wait:g} s)")
            result["sessions"] = measure_sessions(plan, server, base, lg)
        if "concurrency" in plan.metrics and time.monotonic() < stop_at:
            log(f"  {name}: concurrency ladder {plan.ladder}")
            known = result.get("sessions") if plan.sessions_wait == 1.0 else None
            result["concurrency"] = measure_concurrency(plan, server, base, lg, known)
    if time.monotonic() >= stop_at:
        result["cut_short"] = "the run deadline was reached"


def run_all(plan: Plan, stop_at: float) -> dict[str, dict[str, Any]]:
    """Start every server, measure, and always stop them all."""
    results: dict[str, dict[str, Any]] = {}
    servers: dict[str, ServerProcess] = {}
    try:
        for name in plan.servers:
            results[name] = {"server": name, "workers": plan.workers}
            try:
                server = make_server(name, plan.workers)
                servers[name] = server
                server.start()
                results[name]["health"] = server.wait_healthy(180)
            except Exception as exc:  # one server failing must not lose the others' figures
                log(f"{name} did not start: {type(exc).__name__}: {exc}")
                results[name]["error"] = f"did not start: {type(exc).__name__}: {str(exc)[:500]}"
                servers.pop(name, None)
        if plan.wait_quiet > 0:
            wait_for_quiet(min(plan.wait_quiet, max(0.0, stop_at - time.monotonic())))
        measure_per_step(plan, servers, results, stop_at)
        for name, server in servers.items():
            log(f"{name}:")
            try:
                measure_alone(plan, name, server, results[name], stop_at)
            except Exception as exc:
                log(f"  {name} failed: {type(exc).__name__}: {exc}")
                results[name]["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
    finally:
        for server in servers.values():
            server.stop()
    return results


def wait_for_quiet(max_wait: float, busy_limit: float = 0.3) -> float:
    """Wait (up to ``max_wait`` s) until the rest of the machine uses under ``busy_limit`` cores; returns that load."""
    until = time.monotonic() + max_wait
    while True:
        before = procstat.MachineCpu.read()
        time.sleep(1.0)
        busy = procstat.MachineCpu.read().busy_since(before)
        if busy < busy_limit or time.monotonic() >= until:
            return busy
        log(f"  the machine is busy ({busy:.2f} cores used by other processes); waiting")
        time.sleep(4.0)
