"""Ours against the reference and the floor, in one run, with the same load, on this machine.

    python benchmarks/server/compare.py --quick          # about 2-4 minutes
    python benchmarks/server/compare.py                  # the full run (bounded by --deadline)

Three servers, measured on the same machine with the same load:

* ``reference`` — openenv-core 0.3.0 in its own virtualenv (tests/support/reference.py),
  serving its equivalent async environment (``ref_echo_server.py --env bench``);
* ``ours`` — the built-in benchmark environment on ``python -m openenv_runtime.serve``;
* ``floor`` — ``benchmarks/server/floor_app.py``, a bare ASGI app on the same uvicorn with the
  same settings, answering the same messages with a fixed observation.

For each: server CPU per step and steps/s (64 sessions, wait 0) and the single-session step
round trip (the three servers in rotation, so drift of the machine hits all alike), the scaling-study sessions workload at 2,048 sessions (wait 1 s), the largest
batch with ≥95% success up to 16,384, and memory per idle session. Server CPU and memory
come from the kernel (psutil, the server's process tree), because the load generator shares the cores.
The table shows each figure and the ratios ours/floor and ours/reference. Results go to
benchmarks/results/compare-<timestamp>.json (ignored by
git) and benchmarks/server/latest.json + latest.md (committed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# first, even when an editable install already lists it after site-packages (whose
# stray `tests` package would win)
sys.path.insert(0, str(ROOT))

from compare_measure import METRICS, RESULTS, SERVERS, Plan, log, run_all  # noqa: E402
from compare_report import collect_notes, comparison, describe_setup, markdown_report  # noqa: E402

from openenv_cli.bench.worker import raise_open_file_limit  # noqa: E402


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
        "--no-latest",
        action="store_true",
        help="do not overwrite benchmarks/server/latest.{json,md}",
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
        (ROOT / "benchmarks" / "server" / "latest.json").write_text(
            json.dumps(doc, indent=2, default=str) + "\n"
        )
        (ROOT / "benchmarks" / "server" / "latest.md").write_text(md)
    print(md)
    log(
        f"wrote {out}"
        + ("" if plan.no_latest else ", benchmarks/server/latest.json, benchmarks/server/latest.md")
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


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


if __name__ == "__main__":
    sys.exit(main())
