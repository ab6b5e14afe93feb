"""Ours against the reference and the floor, in one run, with the same load, on this machine.

    python benchmarks/compare.py --quick          # about 2-4 minutes
    python benchmarks/compare.py                  # the full run (bounded by --deadline)

Three servers, measured on the same machine with the same load:

* ``reference`` — openenv-core 0.3.0 in its own virtualenv (tests/support/reference.py),
  serving its equivalent async environment (``ref_echo_server.py --env bench``);
* ``ours`` — the built-in benchmark environment on ``python -m openenv_runtime.serve``;
* ``floor`` — ``benchmarks/floor_app.py``, a bare ASGI app on the same uvicorn with the
  same settings, answering the same messages with a fixed observation.

For each: server CPU per step and steps/s (64 sessions, wait 0) and the single-session step
round trip (the three servers in rotation, so drift of the machine hits all alike), the scaling-study sessions workload at 2,048 sessions (wait 1 s), the largest
batch with ≥95% success up to 16,384, and memory per idle session. Server CPU and memory
come from /proc (the server's process tree), because the load generator shares the cores.
The table shows each figure and the ratios ours/floor and ours/reference against the
targets of issue 6. Results go to benchmarks/results/compare-<timestamp>.json (ignored by
git) and benchmarks/latest.json + latest.md (committed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from openenv_cli.bench import procstat  # noqa: E402
from openenv_cli.bench.loadgen import LoadGenerator, raise_open_file_limit  # noqa: E402
from openenv_cli.bench.report import markdown_table  # noqa: E402
from openenv_cli.bench.server import (  # noqa: E402
    BENCH_ENV,
    ServerProcess,
    bench_server,
    free_port,
    get_json,
    pin_tree,
    serve_command,
)
from openenv_cli.bench.sessions import Target  # noqa: E402
from openenv_cli.bench.stats import SUCCESS_THRESHOLD, SessionsCell, ThroughputCell  # noqa: E402

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
    if name == "floor":
        argv = serve_command("floor_app:app", port, workers, app_dir=str(ROOT / "benchmarks"))
        return ServerProcess(argv, port, env=dict(BENCH_ENV), name="floor")
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
            health = get_json(f"{url}/health")
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


# --- the comparison table ---------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    label: str
    unit: str
    get: Callable[[dict[str, Any]], float | None]
    lower_is_better: bool
    target: str
    check: Callable[[float | None, float | None, float | None], bool | None]


def _dig(*keys: str) -> Callable[[dict[str, Any]], float | None]:
    def get(result: dict[str, Any]) -> float | None:
        value: Any = result
        for key in keys:
            if not isinstance(value, dict):
                return None
            value = value.get(key)
        return value if isinstance(value, (int, float)) else None

    return get


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b not in (None, 0) else None


ROWS = [
    Row(
        "server CPU per step (64 sessions)",
        "µs",
        _dig("throughput", "server_cpu_us_per_step"),
        True,
        "ours/floor ≤ 1.4",
        lambda ours, floor, ref: (
            None if _ratio(ours, floor) is None else _ratio(ours, floor) <= 1.4
        ),
    ),
    Row(
        "steps/s (64 sessions, wait 0)",
        "steps/s",
        _dig("throughput", "steps_per_s"),
        False,
        "ours/ref ≥ 2",
        lambda ours, floor, ref: None if _ratio(ours, ref) is None else _ratio(ours, ref) >= 2,
    ),
    Row(
        "step round trip p50 (1 session)",
        "ms",
        _dig("latency", "rtt_p50_ms"),
        True,
        "ours/floor ≤ 1.3",
        lambda ours, floor, ref: (
            None if _ratio(ours, floor) is None else _ratio(ours, floor) <= 1.3
        ),
    ),
    Row(
        "server CPU per step (1 session)",
        "µs",
        _dig("latency", "server_cpu_us_per_step"),
        True,
        "",
        lambda *a: None,
    ),
    Row(
        "2,048 sessions wait 1 s: total p99",
        "s",
        lambda r: (_dig("sessions", "total_p99_ms")(r) or 0) / 1000 or None,
        True,
        "ours/ref ≤ 0.5",
        lambda ours, floor, ref: None if _ratio(ours, ref) is None else _ratio(ours, ref) <= 0.5,
    ),
    Row(
        "2,048 sessions wait 1 s: success",
        "%",
        lambda r: (
            None if _dig("sessions", "success")(r) is None else 100 * _dig("sessions", "success")(r)
        ),
        False,
        "≥ 95%",
        lambda ours, floor, ref: None if ours is None else ours >= 95,
    ),
    Row(
        "max sessions at ≥95% (wait 1 s)",
        "sessions",
        _dig("concurrency", "max_sessions"),
        False,
        "ours ≥ 16,384",
        lambda ours, floor, ref: None if ours is None else ours >= 16384,
    ),
    Row(
        "memory per idle session",
        "KB",
        _dig("memory", "kb_per_idle_session"),
        True,
        "ours/ref ≤ 0.25",
        lambda ours, floor, ref: None if _ratio(ours, ref) is None else _ratio(ours, ref) <= 0.25,
    ),
]


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "–"
    if unit in ("sessions", "steps/s"):
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.3f}"


def comparison(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for row in ROWS:
        ref, ours, floor = (row.get(results[n]) if n in results else None for n in SERVERS)
        rows.append(
            {
                "metric": row.label,
                "unit": row.unit,
                "reference": ref,
                "ours": ours,
                "floor": floor,
                "ours_over_floor": _ratio(ours, floor),
                "ours_over_reference": _ratio(ours, ref),
                "target": row.target,
                "met": row.check(ours, floor, ref),
            }
        )
    return rows


def table_rows(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    headers = [
        "metric",
        "unit",
        "reference",
        "ours",
        "floor",
        "ours/floor",
        "ours/ref",
        "target",
        "met",
    ]
    body = []
    for r in rows:
        met = {True: "yes", False: "**no**", None: "–"}[r["met"]] if r["target"] else ""
        body.append(
            [
                r["metric"],
                r["unit"],
                _fmt(r["reference"], r["unit"]),
                _fmt(r["ours"], r["unit"]),
                _fmt(r["floor"], r["unit"]),
                "–" if r["ours_over_floor"] is None else f"{r['ours_over_floor']:.2f}×",
                "–" if r["ours_over_reference"] is None else f"{r['ours_over_reference']:.2f}×",
                r["target"],
                met,
            ]
        )
    return headers, body


def describe_setup(plan: Plan) -> list[str]:
    cores = os.cpu_count() or 1
    lines = [
        f"Machine: {cores} cores; {plan.workers} worker(s) per server; "
        f"load generator: {'websockets sans-I/O protocol on a plain asyncio.Protocol' if plan.client == 'lean' else 'websockets asyncio client'} on uvloop, permessage-deflate "
        f"{'offered (as common clients do)' if plan.compression else 'off'}, per-operation timeout {plan.timeout:g} s.",
    ]
    if plan.pin and cores >= 2:
        lines.append(
            "CPU per step, steps/s and round trip: every server running (an idle one costs nothing), "
            "measured in rotation (A B C, B C A, ...) so that drift affects all alike, the measured server "
            "pinned to core 0 and the load generator (1 process) to core 1. Memory: the same pinning. "
            "Sessions and concurrency runs: one server at a time, unpinned (all cores), the load "
            f"generator in {plan.loadgen_processes} unpinned processes."
        )
    else:
        lines.append("No CPU pinning: server and load generator share every core.")
    lines.append(
        "Server CPU is user+system time of the server's process tree from /proc; memory is the "
        "tree's RSS with N idle sessions open minus before, divided by N."
    )
    lines.append(
        "The reference runs on what openenv-core installs (uvicorn with asyncio and h11, no uvloop or "
        "httptools); ours and the floor on this project's uvicorn with uvloop and httptools."
    )
    return lines


def markdown_report(doc: dict[str, Any]) -> str:
    lines = [
        f"# Ours vs. the reference vs. the floor ({'quick' if doc['quick'] else 'full'} run)",
        "",
        f"Measured {doc['started_at']} (revision {doc.get('revision') or 'unknown'}) in "
        f"{doc['duration_s']:.0f} s with `python benchmarks/compare.py{' --quick' if doc['quick'] else ''}`.",
        "",
    ]
    lines += [f"- {line}" for line in doc["setup"]] + [""]
    lines += [markdown_table(*table_rows(doc["comparison"])), ""]
    if doc.get("notes"):
        lines += ["Notes:", ""] + [f"- {n}" for n in doc["notes"]] + [""]
    return "\n".join(lines)


def collect_notes(results: dict[str, dict[str, Any]]) -> list[str]:
    notes = []
    for name, result in results.items():
        for metric in ("throughput", "latency", "sessions"):
            other = (result.get(metric) or {}).get("other_cores")
            if other is not None and other > 0.15:
                notes.append(
                    f"{name} {metric}: other processes on the machine used {other:.2f} cores meanwhile; "
                    "the figure may be disturbed"
                )
        skipped = (result.get("concurrency") or {}).get("not_tried")
        if skipped:
            notes.append(
                f"{name}: concurrency not tried at {', '.join(f'{b:,}' for b in skipped)} "
                "(extrapolated to exceed the timeouts; the full run tries every step)"
            )
        if result.get("error"):
            notes.append(f"{name}: {result['error']}")
        if result.get("cut_short"):
            notes.append(f"{name}: {result['cut_short']}")
        memory = result.get("memory")
        if memory:
            notes.append(
                f"{name}: {memory['threads_with_idle_sessions']} threads with {memory['idle_sessions']} idle "
                f"sessions (vs {memory['baseline_threads']} before)"
            )
        thr = result.get("throughput")
        if thr and thr.get("loadgen_cpu_us_per_step"):
            notes.append(
                f"{name}: load generator {thr['loadgen_cpu_us_per_step']:.0f} µs CPU per step at "
                f"{thr['sessions']} sessions (the server: {thr['server_cpu_us_per_step'] or 0:.0f} µs); "
                f"cores used during the steps: server {thr.get('server_core_share') or 0:.2f}, "
                f"load generator {thr.get('loadgen_core_share') or 0:.2f}"
            )
            if (thr.get("loadgen_core_share") or 0) > 0.9 and (
                thr.get("server_core_share") or 0
            ) < 0.9:
                notes.append(
                    f"{name}: the load generator saturated its core, so its steps/s is a lower bound "
                    "(CPU per step is unaffected)"
                )
    return notes


def parse_args(argv: list[str] | None) -> Plan:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="smaller counts: a run of a few minutes"
    )
    parser.add_argument(
        "--servers", default=",".join(SERVERS), help=f"subset of {','.join(SERVERS)}"
    )
    parser.add_argument(
        "--metrics", default=",".join(METRICS), help=f"subset of {','.join(METRICS)}"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="server worker processes (every server)"
    )
    parser.add_argument(
        "--ladder", help="batch sizes of the concurrency ladder, e.g. 4096,8192,16384"
    )
    parser.add_argument("--idle-sessions", type=int, help="idle sessions for the memory figure")
    parser.add_argument(
        "--steps", type=int, help="steps per session of the 64-session throughput runs"
    )
    parser.add_argument(
        "--latency-steps", type=int, help="steps of the single-session round-trip runs"
    )
    parser.add_argument(
        "--reps", type=int, help="repetitions of the throughput, latency and 2,048-session runs"
    )
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds each operation may take"
    )
    parser.add_argument("--deadline", type=float, help="seconds the whole comparison may take")
    parser.add_argument(
        "--no-pin", action="store_true", help="do not pin server and load generator to cores"
    )
    parser.add_argument(
        "--no-compression", action="store_true", help="do not offer permessage-deflate"
    )
    parser.add_argument(
        "--client",
        choices=("lean", "websockets"),
        default="lean",
        help="load generator's WebSocket client (lean: websockets' sans-I/O protocol)",
    )
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        help="before each server, wait up to this many seconds for other processes to go quiet",
    )
    parser.add_argument(
        "--no-latest", action="store_true", help="do not overwrite benchmarks/latest.{json,md}"
    )
    parser.add_argument(
        "--results-dir", type=Path, default=RESULTS, help="where compare-<timestamp>.json goes"
    )
    args = parser.parse_args(argv)
    servers = [s for s in args.servers.split(",") if s]
    metrics = [m for m in args.metrics.split(",") if m]
    bad = [s for s in servers if s not in SERVERS] + [m for m in metrics if m not in METRICS]
    if bad:
        parser.error(f"unknown server or metric: {', '.join(bad)}")
    plan = Plan(
        servers=servers,
        metrics=metrics,
        quick=args.quick,
        workers=args.workers,
        timeout=args.timeout,
        pin=not args.no_pin,
        compression=not args.no_compression,
        client=args.client,
    )
    if args.quick:
        plan.throughput_steps, plan.throughput_reps = 150, 1
        plan.latency_steps, plan.latency_reps = 1000, 1
        plan.sessions_reps = 1
        plan.ladder = [16384]
        plan.ladder_deadline = 75.0
        plan.idle_sessions = 500
        plan.deadline = 600.0
    if args.ladder:
        plan.ladder = sorted(int(b) for b in args.ladder.split(","))
    if args.idle_sessions:
        plan.idle_sessions = args.idle_sessions
    if args.steps:
        plan.throughput_steps = args.steps
    if args.latency_steps:
        plan.latency_steps = args.latency_steps
    if args.reps:
        plan.throughput_reps = plan.latency_reps = plan.sessions_reps = args.reps
    if args.deadline:
        plan.deadline = args.deadline
    plan.no_latest = args.no_latest
    plan.wait_quiet = args.wait_quiet
    plan.results_dir = args.results_dir
    return plan


def main(argv: list[str] | None = None) -> int:
    plan = parse_args(argv)
    raise_open_file_limit()
    started = time.monotonic()
    stop_at = started + plan.deadline
    stamp = datetime.now(UTC)
    setup = describe_setup(plan)
    for line in setup:
        log(line)
    results = run_all(plan, stop_at)
    rows = comparison(results)
    doc = {
        "schema_version": 1,
        "started_at": stamp.isoformat(timespec="seconds"),
        "quick": plan.quick,
        "duration_s": time.monotonic() - started,
        "setup": setup,
        "plan": {k: (str(v) if isinstance(v, Path) else v) for k, v in plan.__dict__.items()},
        "revision": git_revision(),
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "somaxconn": _read("/proc/sys/net/core/somaxconn"),
            "ephemeral_ports": _read("/proc/sys/net/ipv4/ip_local_port_range"),
        },
        "comparison": rows,
        "servers": results,
        "notes": collect_notes(results),
    }
    plan.results_dir.mkdir(parents=True, exist_ok=True)
    out = plan.results_dir / f"compare-{stamp.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    md = markdown_report(doc)
    if not plan.no_latest:
        (ROOT / "benchmarks" / "latest.json").write_text(
            json.dumps(doc, indent=2, default=str) + "\n"
        )
        (ROOT / "benchmarks" / "latest.md").write_text(md)
    print(md)
    log(
        f"wrote {out}"
        + ("" if plan.no_latest else ", benchmarks/latest.json, benchmarks/latest.md")
    )
    return 0


def git_revision() -> str | None:
    """The commit measured, with ``+dirty`` when the working tree has uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "runtime",
                "openenv_cli",
                "benchmarks",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (head + ("+dirty" if dirty else "")) or None


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


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


if __name__ == "__main__":
    sys.exit(main())
