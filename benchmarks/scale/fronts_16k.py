"""16,384 sessions through Envoy fronts on one machine whose processes hold 20,000 open files.

    python benchmarks/scale/fronts_16k.py                  # 16,384 sessions, wait 1 s
    python benchmarks/scale/fronts_16k.py --batch 2048     # a short check of the set-up

One Envoy process holds two sockets a session (the client's and the replica's), so at
20,000 open files a process one front stops near 9,500 sessions. ``openenv deploy envoy``
sizes the fronts for the capacity asked for (``fronts × sessions per front``, from
``--front-nofile``, default ``ulimit -Hn``); this script renders that configuration for two
replicas of the built-in benchmark environment, starts the fronts it asks for as separate
Envoy processes on one port (SO_REUSEPORT: the kernel spreads the connections), and runs
``openenv bench`` sessions mode through them: each session connects, resets, steps once (the
step waits 1 s) and closes, all at once.

Per front, sampled every second from /proc and its admin page: peak open files, peak active
downstream connections, connections accepted, connections refused by its limit, CPU seconds
and peak RSS. Results: ``benchmarks/scale/fronts_16k.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deploy_envoy import APP, ROOT, env, start, stop, wait_healthy

from openenv_runtime.testing import free_port

HERE = Path(__file__).resolve().parent
CLOCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def proc_figures(pid: int) -> tuple[int, float, int]:
    """(open files, CPU seconds, RSS bytes) of one process."""
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / CLOCK
        rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0, 0.0, 0
    return fds, cpu, rss


def admin_stats(address: str) -> dict[str, int]:
    """Counters and gauges of one front (the listener on the front port and the cluster)."""
    try:
        with urllib.request.urlopen(f"http://{address}/stats?format=json", timeout=2) as r:
            data = json.loads(r.read())
    except (OSError, ValueError):
        return {}
    wanted = (
        "http.front.downstream_cx_active",
        "http.front.downstream_cx_total",
        "cluster.replicas.upstream_cx_total",
        "cluster.replicas.upstream_cx_overflow",
        "cluster.replicas.upstream_rq_pending_overflow",
        "cluster.replicas.upstream_cx_connect_timeout",
        "cluster.replicas.upstream_cx_connect_fail",
        "cluster.replicas.upstream_rq_retry",
        "cluster.replicas.upstream_rq_retry_overflow",
        "cluster.replicas.upstream_rq_503",
        "cluster.replicas.upstream_cx_none_healthy",
        "cluster.replicas.outlier_detection.ejections_enforced_total",
        "cluster.replicas.health_check.failure",
        "overload.envoy.resource_monitors.global_downstream_max_connections.pressure",
    )
    found = {s["name"]: int(s.get("value", 0)) for s in data.get("stats", []) if "name" in s}
    found = {k: v for k, v in found.items() if k in wanted or k.endswith("downstream_cx_overflow")}
    return found


class Sampler(threading.Thread):
    """Samples every front once a second; keeps the peaks."""

    def __init__(self, fronts: list[tuple[int, str]]) -> None:
        super().__init__(daemon=True)
        self.fronts = fronts
        self.peaks: list[dict[str, Any]] = [
            {"pid": pid, "peak_open_files": 0, "peak_active": 0, "peak_rss_mb": 0.0}
            for pid, _ in fronts
        ]
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(1.0):
            for peak, (pid, admin) in zip(self.peaks, self.fronts, strict=True):
                fds, _, rss = proc_figures(pid)
                active = admin_stats(admin).get("http.front.downstream_cx_active", 0)
                peak["peak_open_files"] = max(peak["peak_open_files"], fds)
                peak["peak_active"] = max(peak["peak_active"], active)
                peak["peak_rss_mb"] = max(peak["peak_rss_mb"], rss / 2**20)


def bench(url: str, out: Path, batch: int, deadline: float) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="bench-", dir=out))
    subprocess.run(
        [sys.executable, "-m", "openenv_cli.main", "bench", "--url", url, "--no-plots",
         "--output-dir", str(folder), "--deadline", str(deadline), "--requests-grid", str(batch),
         "--wait-grid", "1.0", "--reps", "1", "--processes", "2", "--timeout", "60"],
        cwd=ROOT, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        timeout=deadline + 120, check=False,
    )  # fmt: skip
    reports = sorted(folder.glob("bench-*.json"))
    if not reports:
        raise RuntimeError(f"openenv bench wrote no report for {url}")
    report: dict[str, Any] = json.loads(reports[-1].read_text())
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16_384, help="sessions at once")
    parser.add_argument("--replicas", type=int, default=2, help="server replicas")
    parser.add_argument("--deadline", type=float, default=300, help="seconds for the bench run")
    options = parser.parse_args()
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))  # children inherit it
    # Each replica accepts a little more than its share: least-request balancing is not exact.
    per_replica = (options.batch // options.replicas) * 9 // 8
    work = Path(tempfile.mkdtemp(prefix="fronts-"))
    ports = [free_port() for _ in range(options.replicas)]
    front_port = free_port()
    replicas = [
        start([sys.executable, "-m", "openenv_runtime.serve", APP, "--port", str(p)],
              MAX_CONCURRENT_ENVS=str(per_replica))
        for p in ports
    ]  # fmt: skip
    envoys: list[subprocess.Popen[bytes]] = []
    sampler: Sampler | None = None
    try:
        for port in ports:
            wait_healthy(f"http://127.0.0.1:{port}")
        rendered = subprocess.run(
            [sys.executable, "-m", "openenv_cli.main", "deploy", "envoy", "--json", "--port",
             str(front_port), "--out", str(work / "envoy"),
             *(a for p in ports for a in ("--backend", f"127.0.0.1:{p}"))],
            cwd=work, env=env(MAX_CONCURRENT_ENVS=str(per_replica)), capture_output=True,
            text=True, check=False,
        )  # fmt: skip
        if rendered.returncode != 0:
            raise RuntimeError(rendered.stderr)
        plan = json.loads(rendered.stdout)
        envoy_bin = Path(sys.executable).parent / "envoy"
        admins = [work / f"front-{i}.admin" for i in range(plan["fronts"])]
        envoys = [
            start([str(envoy_bin if envoy_bin.exists() else "envoy"), "-c",
                   str(work / "envoy" / "envoy.yaml"), "--log-level", "error",
                   "--use-dynamic-base-id", "--admin-address-path", str(admin)])
            for admin in admins
        ]  # fmt: skip
        front = f"http://127.0.0.1:{front_port}"
        wait_healthy(front)
        until = time.monotonic() + 30
        while not all(a.is_file() and a.read_text().strip() for a in admins):
            if time.monotonic() > until:
                raise RuntimeError("a front did not write its admin address")
            time.sleep(0.2)
        addresses = [a.read_text().strip() for a in admins]
        time.sleep(6)  # both replicas through their first health checks
        before = [proc_figures(e.pid) for e in envoys]
        sampler = Sampler([(e.pid, a) for e, a in zip(envoys, addresses, strict=True)])
        sampler.start()
        load_before = os.getloadavg()
        report = bench(front, work, options.batch, options.deadline)
        sampler.halt.set()
        sampler.join()
        after = [proc_figures(e.pid) for e in envoys]
        per_front = []
        for peak, address, b, a in zip(sampler.peaks, addresses, before, after, strict=True):
            stats = admin_stats(address)
            per_front.append(
                peak
                | {
                    "connections_accepted": stats.get("http.front.downstream_cx_total", 0),
                    "upstream_connections": stats.get("cluster.replicas.upstream_cx_total", 0),
                    "refused_by_limits": sum(
                        v
                        for k, v in stats.items()
                        if k.endswith(("cx_overflow", "pending_overflow"))
                    ),
                    "cpu_s": round(a[1] - b[1], 2),
                    "envoy_stats": {
                        k.removeprefix("cluster.replicas."): v for k, v in stats.items()
                    },
                }
            )
    finally:
        if sampler is not None:
            sampler.halt.set()
        for process in envoys:
            stop(process)
        for process in replicas:
            stop(process)

    summary = report["sessions_summary"][0]
    cell = report["sessions"][0]
    document = {
        "benchmark": "fronts_16k",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "open_files_per_process": nofile,
            "load_average_before": [round(x, 2) for x in load_before],
            "shared": "2 cores shared with other agents' work",
        },
        "deploy": {
            "replicas": options.replicas,
            "sessions_per_replica": per_replica,
            "capacity": plan["fronts"] * plan["sessions_per_front"],
            "fronts": plan["fronts"],
            "sessions_per_front": plan["sessions_per_front"],
        },
        "result": {
            "batch": options.batch,
            "wait_s": 1.0,
            "success_rate": summary["success_rate"],
            "ok": cell["ok"],
            "errors": cell["errors"],
            "connect_p50_ms": cell["connect"]["p50"],
            "connect_p99_ms": cell["connect"]["p99"],
            "total_p50_ms": summary["total_p50"],
            "total_p99_ms": summary["total_p99"],
            "wall_s": cell["wall_s"],
            "loadgen_cpu_s": cell["loadgen_cpu_s"],
        },
        "fronts": per_front,
    }
    table = markdown(document)
    print(table)
    if options.batch == 16_384:
        (HERE / "fronts_16k.json").write_text(json.dumps(document, indent=2) + "\n")
        (HERE / "fronts_16k.md").write_text(table)


def markdown(document: dict[str, Any]) -> str:
    deploy, result, machine = document["deploy"], document["result"], document["machine"]
    errors = ", ".join(f"{k} ×{v}" for k, v in result["errors"].items()) or "none"
    lines = [
        f"# {result['batch']:,} sessions through {deploy['fronts']} Envoy fronts (wait 1 s)",
        "",
        f"Rendered by `openenv deploy envoy` for {deploy['replicas']} replicas × "
        f"{deploy['sessions_per_replica']:,} sessions at {machine['open_files_per_process']:,} "
        f"open files a process: {deploy['fronts']} fronts × {deploy['sessions_per_front']:,} "
        "sessions, one port (SO_REUSEPORT).",
        "",
        "| sessions | success | ok | connect p50 | connect p99 | total p50 | total p99 | wall |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {result['batch']:,} | {result['success_rate']:.2%} | {result['ok']:,} | "
        f"{result['connect_p50_ms'] / 1000:.2f} s | {result['connect_p99_ms'] / 1000:.2f} s | "
        f"{result['total_p50_ms'] / 1000:.2f} s | {result['total_p99_ms'] / 1000:.2f} s | "
        f"{result['wall_s']:.1f} s |",
        "",
        f"Failures: {errors}.",
        "",
        "| front | connections accepted | peak active | peak open files | refused by limits "
        "| CPU s | peak RSS |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {i} | {f['connections_accepted']:,} | {f['peak_active']:,} | "
            f"{f['peak_open_files']:,} | {f['refused_by_limits']:,} | {f['cpu_s']:.1f} | "
            f"{f['peak_rss_mb']:.0f} MiB |"
            for i, f in enumerate(document["fronts"], 1)
        ),
        "",
        "Peak active is the most sessions one front had open at a sampled instant (once a "
        "second): the batch starts every session at once, but its handshakes spread over the "
        f"connect time (p99 {result['connect_p99_ms'] / 1000:.0f} s) while each session lasts "
        f"about a second after it, so together the fronts peaked at "
        f"{sum(f['peak_active'] for f in document['fronts']):,} open sessions.",
        "",
        "Envoy's own counters, per front: "
        + "; ".join(
            f"front {i}: "
            + ", ".join(f"{k} {v:,}" for k, v in sorted(f.get("envoy_stats", {}).items()) if v)
            for i, f in enumerate(document["fronts"], 1)
        )
        + ".",
        "",
        f"Machine: {machine['cpus']} cores, {machine['shared']} (load average before the run "
        f"{machine['load_average_before'][0]:.1f}); replicas, fronts and the load generator "
        "(2 processes) all on it.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
