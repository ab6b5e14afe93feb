"""Session-start latency at 4,096, 8,192 and 16,384 concurrent sessions through Envoy fronts.

    python benchmarks/scale/connect_latency.py --label before            # the curve, as rendered
    python benchmarks/scale/connect_latency.py --rate 250    # 250 connects a second
    python benchmarks/scale/connect_latency.py --sizes 16384 --flame benchmarks/scale/connect-flame-after.svg

Session start = from the client opening its TCP connection to the first ``reset`` answered
(TCP connect + WebSocket upgrade through Envoy to a replica + the replica building the
environment + the reset round trip). Every session stays open until the last one of its
size has started, so the size is the number of sessions open at once; then all close.

What runs (as ``fronts_16k.py``): two replicas of the built-in benchmark environment, and as
many Envoy fronts as ``openenv deploy envoy --json`` asks for at this machine's open-file
limit, sharing one port (SO_REUSEPORT). The load generator is this script's own: ``--procs``
processes (uvloop, the runtime's sans-I/O WebSocket client, no compression), each opening its
share of the sessions; ``--rate R`` starts them evenly at R a second instead of all at once
(0). Its own cost is reported apart: CPU seconds per process (``getrusage``), and how late the
last connect was issued.

Also per run: CPU seconds of the replicas and of the fronts (from /proc), the kernel's
listen-queue counters (``TcpExt`` ListenOverflows / ListenDrops / TCPReqQFullDrop /
SyncookiesSent, for the network namespace: other work on the machine adds to them), Envoy's
counters, and the one-minute load average before and after. ``--pin`` puts replicas and
fronts on core 0 and the load generator on core 1 (``taskset``); without it all share both.
``--flame SVG`` records replica 1 with py-spy during the largest size.

Results: ``benchmarks/scale/connect_latency.json`` (runs keyed by ``--label``, kept across
invocations) and ``connect_latency.md`` (the table).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from multiprocessing.connection import Connection as Pipe
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from deploy_envoy import APP, ROOT, stop, wait_healthy  # noqa: E402

from openenv_runtime.client.transport import Connection  # noqa: E402
from openenv_runtime.testing import free_port  # noqa: E402

CLOCK = os.sysconf("SC_CLK_TCK")
RESET = '{"type":"reset"}'
CLOSE = '{"type":"close"}'
NETSTAT = ("ListenOverflows", "ListenDrops", "TCPReqQFullDrop", "SyncookiesSent")
ENVOY_STATS = (
    "http.front.downstream_cx_total",
    "http.front.downstream_cx_overflow",
    "cluster.replicas.upstream_cx_total",
    "cluster.replicas.upstream_cx_connect_fail",
    "cluster.replicas.upstream_cx_connect_timeout",
    "cluster.replicas.upstream_rq_retry",
    "cluster.replicas.upstream_rq_503",
    "cluster.replicas.upstream_cx_none_healthy",
    "cluster.replicas.health_check.failure",
    "listener.0.0.0.0_{port}.downstream_cx_overflow",
)


# --- the load generator (one process's share) ------------------------------------------------


async def _session(
    url: str, delay: float, t0: float, opened: asyncio.Event, release: asyncio.Event
) -> dict[str, Any]:
    if delay:
        await asyncio.sleep(delay)
    begin = time.perf_counter()
    issued = begin - t0 - delay  # how late the load generator issued this connect
    ws = None
    try:
        async with asyncio.timeout(120):
            ws = await Connection.open(url, use_proxy=False, compression=False)
            upgraded = time.perf_counter()
            reply = await ws.request(RESET)
        started = time.perf_counter()
        ok = isinstance(reply, str) and '"observation"' in reply[:200]
        result: dict[str, Any] = {
            "ok": ok,
            "start": started - begin,
            "upgrade": upgraded - begin,
            "late": issued,
            "error": None if ok else str(reply)[:120],
        }
    except Exception as exc:
        result = {"ok": False, "late": issued, "error": f"{type(exc).__name__}: {exc}"[:120]}
    opened.set()
    await release.wait()
    if ws is not None:
        try:
            ws.send(CLOSE)
            async with asyncio.timeout(30):
                await ws.close()
        except Exception:
            ws.abort()
    return result


async def _share(url: str, count: int, ramp: float, pipe: Pipe) -> None:
    loop = asyncio.get_running_loop()
    release = asyncio.Event()
    done = 0
    all_opened = asyncio.Event()

    def one_opened() -> None:
        nonlocal done
        done += 1
        if done == count:
            all_opened.set()

    events = []
    pipe.send("ready")
    await loop.run_in_executor(None, pipe.recv)  # every process starts at once
    cpu_before = _cpu()
    t0 = time.perf_counter()
    tasks = []
    for i in range(count):
        event = asyncio.Event()
        events.append(event)
        delay = ramp * i / count if ramp else 0.0
        tasks.append(loop.create_task(_session(url, delay, t0, event, release)))
    waiters = [loop.create_task(_watch(e, one_opened)) for e in events]
    await all_opened.wait()
    pipe.send("opened")
    await loop.run_in_executor(None, pipe.recv)  # every process's sessions are open
    release.set()
    results = await asyncio.gather(*tasks)
    for w in waiters:
        w.cancel()
    pipe.send({"results": results, "cpu_s": _cpu() - cpu_before})


def _cpu() -> float:
    """This process's CPU seconds (its imports and start-up excluded by the caller)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _watch(event: asyncio.Event, then: Any) -> None:
    await event.wait()
    then()


def loadgen_worker(url: str, count: int, ramp: float, pipe: Pipe) -> None:
    import gc

    import uvloop

    gc.disable()  # a bounded run: its garbage waits for the exit (the collector's walks
    # over thousands of live sessions would be the load generator's largest cost)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    uvloop.run(_share(url, count, ramp, pipe))


def storm(url: str, sessions: int, procs: int, ramp: float, cpus: str | None) -> dict[str, Any]:
    """``sessions`` sessions from ``procs`` processes; all held open until the last has started."""
    context = mp.get_context("spawn")
    pipes, workers = [], []
    for i in range(procs):
        share = sessions // procs + (1 if i < sessions % procs else 0)
        ours, theirs = context.Pipe()
        worker = context.Process(target=loadgen_worker, args=(url, share, ramp, theirs))
        worker.start()
        if cpus:
            subprocess.run(["taskset", "-pc", cpus, str(worker.pid)], capture_output=True)
        pipes.append(ours)
        workers.append(worker)
    for pipe in pipes:
        pipe.recv()  # ready
    began = time.perf_counter()
    for pipe in pipes:
        pipe.send("go")
    for pipe in pipes:
        pipe.recv()  # opened
    all_open_s = time.perf_counter() - began
    for pipe in pipes:
        pipe.send("release")
    parts = [pipe.recv() for pipe in pipes]
    for worker in workers:
        worker.join(30)
    results = [r for part in parts for r in part["results"]]
    return {
        "results": results,
        "loadgen_cpu_s": [round(p["cpu_s"], 2) for p in parts],
        "all_open_s": all_open_s,
    }


# --- the servers -----------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK
    except (OSError, IndexError, ValueError):
        return 0.0


def netstat() -> dict[str, int]:
    lines = Path("/proc/net/netstat").read_text().splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], map(int, values.split()[1:]), strict=True))
            return {k: table.get(k, 0) for k in NETSTAT}
    return {}


def envoy_stats(address: str, port: int) -> dict[str, int]:
    try:
        with urllib.request.urlopen(f"http://{address}/stats?format=json", timeout=5) as r:
            data = json.loads(r.read())
    except (OSError, ValueError):
        return {}
    wanted = {name.format(port=port) for name in ENVOY_STATS}
    return {
        s["name"]: int(s.get("value", 0))
        for s in data.get("stats", [])
        if s.get("name") in wanted and "value" in s
    }


RUNTIME = ROOT / "runtime"  # the servers' openenv_runtime (--runtime: another checkout's)


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("PORT", "WORKERS")}
    return base | {"PYTHONPATH": f"{RUNTIME}{os.pathsep}{ROOT}", "LOG_LEVEL": "warning"} | extra


def start(args: list[str], cpus: str | None, **extra: str) -> subprocess.Popen[bytes]:
    command = ["taskset", "-c", cpus, *args] if cpus else args
    return subprocess.Popen(
        command, cwd=ROOT, env=env(**extra), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


class Fleet:
    """Two replicas and the fronts ``openenv deploy envoy`` asks for, on one machine."""

    def __init__(
        self,
        capacity: int,
        replicas: int,
        cpus: str | None,
        backlog: int | None,
        settings: dict[str, str],
    ) -> None:
        self.work = Path(tempfile.mkdtemp(prefix="connect-latency-"))
        ports = [free_port() for _ in range(replicas)]
        self.front_port = free_port()
        per_replica = capacity // replicas * 9 // 8
        extra = {"MAX_CONCURRENT_ENVS": str(per_replica), **settings}
        self.replicas = [
            start([sys.executable, "-m", "openenv_runtime.serve", APP, "--port", str(p),
                   *(["--backlog", str(backlog)] if backlog else [])], cpus, **extra)
            for p in ports
        ]  # fmt: skip
        self.envoys: list[subprocess.Popen[bytes]] = []
        try:
            for port in ports:
                wait_healthy(f"http://127.0.0.1:{port}")
            rendered = subprocess.run(
                [sys.executable, "-m", "openenv_cli.main", "deploy", "envoy", "--json",
                 "--port", str(self.front_port), "--out", str(self.work / "envoy"),
                 *(a for p in ports for a in ("--backend", f"127.0.0.1:{p}"))],
                cwd=self.work, env=env(**extra), capture_output=True, text=True, check=False,
            )  # fmt: skip
            if rendered.returncode != 0:
                raise RuntimeError(rendered.stderr)
            self.plan = json.loads(rendered.stdout)
            self.plan["sessions_per_replica"] = per_replica
            binary = shutil.which("envoy") or str(Path(sys.executable).parent / "envoy")
            admins = [self.work / f"front-{i}.admin" for i in range(self.plan["fronts"])]
            self.envoys = [
                start([binary, "-c", str(self.work / "envoy" / "envoy.yaml"), "--log-level",
                       "error", "--use-dynamic-base-id", "--admin-address-path", str(a)], cpus)
                for a in admins
            ]  # fmt: skip
            wait_healthy(f"http://127.0.0.1:{self.front_port}")
            until = time.monotonic() + 30
            while not all(a.is_file() and a.read_text().strip() for a in admins):
                if time.monotonic() > until:
                    raise RuntimeError("a front did not write its admin address")
                time.sleep(0.2)
            self.admins = [a.read_text().strip() for a in admins]
            time.sleep(6)  # the replicas through their first health checks
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.front_port}/ws"

    def pids(self) -> dict[str, list[int]]:
        return {"replicas": [p.pid for p in self.replicas], "fronts": [e.pid for e in self.envoys]}

    def stats(self) -> list[dict[str, int]]:
        return [envoy_stats(a, self.front_port) for a in self.admins]

    def stop(self) -> None:
        for process in [*self.envoys, *self.replicas]:
            stop(process)


def server_pids(process: subprocess.Popen[bytes]) -> list[int]:
    """The process and its children (``taskset`` execs; a replica may fork workers)."""
    found = [process.pid]
    try:
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        found += [int(c) for c in children]
    except OSError:
        pass
    return found


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(
    fleet: Fleet, size: int, procs: int, ramp: float, cpus: str | None, flame: Path | None
) -> dict[str, Any]:
    groups = {
        "replicas": [pid for p in fleet.replicas for pid in server_pids(p)],
        "fronts": [pid for e in fleet.envoys for pid in server_pids(e)],
    }
    cpu_before = {k: sum(cpu_seconds(p) for p in v) for k, v in groups.items()}
    net_before = netstat()
    stats_before = fleet.stats()
    load_before = os.getloadavg()[0]
    spy = None
    if flame is not None:
        target = groups["replicas"][-1]  # the Python process (taskset execs into it)
        spy = subprocess.Popen(
            ["py-spy", "record", "--pid", str(target), "--rate", "200", "--nonblocking",
             "--output", str(flame), "--format", "flamegraph", "--duration", "600"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(1)
    began = time.perf_counter()
    run = storm(fleet.url, size, procs, ramp, cpus)
    wall = time.perf_counter() - began
    if spy is not None:
        spy.send_signal(2)  # SIGINT: py-spy writes the SVG and exits
        spy.wait(60)
    cpu_after = {k: sum(cpu_seconds(p) for p in v) for k, v in groups.items()}
    net_after = netstat()
    stats_after = fleet.stats()
    results = run["results"]
    ok = [r for r in results if r["ok"]]
    starts = [r["start"] * 1000 for r in ok]
    upgrades = [r["upgrade"] * 1000 for r in ok]
    errors: dict[str, int] = {}
    for r in results:
        if not r["ok"]:
            label = str(r["error"]).split(":")[0]
            errors[label] = errors.get(label, 0) + 1
    front_deltas = [
        {k: a.get(k, 0) - b.get(k, 0) for k in a if a.get(k, 0) - b.get(k, 0)}
        for b, a in zip(stats_before, stats_after, strict=True)
    ]
    return {
        "sessions": size,
        "ramp_s": ramp,
        "ok": len(ok),
        "success": len(ok) / size,
        "errors": errors,
        "start_p50_ms": percentile(starts, 0.5),
        "start_p90_ms": percentile(starts, 0.9),
        "start_p99_ms": percentile(starts, 0.99),
        "start_max_ms": max(starts) if starts else None,
        "upgrade_p50_ms": percentile(upgrades, 0.5),
        "upgrade_p99_ms": percentile(upgrades, 0.99),
        "all_open_s": round(run["all_open_s"], 2),
        "wall_s": round(wall, 2),
        "issue_late_max_ms": round(max(r["late"] for r in results) * 1000, 1),
        "cpu_s": {
            **{k: round(cpu_after[k] - cpu_before[k], 2) for k in groups},
            "loadgen": run["loadgen_cpu_s"],
        },
        "kernel": {k: net_after.get(k, 0) - net_before.get(k, 0) for k in NETSTAT},
        "envoy": front_deltas,
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4096,8192,16384")
    parser.add_argument("--label", default="run", help="key of this run in the JSON")
    parser.add_argument("--procs", type=int, default=2, help="load generator processes")
    parser.add_argument(
        "--rate", type=float, default=0.0, help="connects per second (0: all at once)"
    )
    parser.add_argument("--pin", action="store_true", help="servers on core 0, loadgen on core 1")
    parser.add_argument("--backlog", type=int, help="--backlog passed to each replica")
    parser.add_argument("--flame", type=Path, help="py-spy SVG of replica 1 at the largest size")
    parser.add_argument("--rest", type=float, default=5.0, help="seconds between sizes")
    parser.add_argument("--note", default="", help="what this run changed")
    parser.add_argument("--runtime", type=Path, help="the servers' runtime/ (e.g. main's)")
    parser.add_argument(
        "--ping-interval", type=float, help="the replicas' WS_PING_INTERVAL (0: no keepalive pings)"
    )
    options = parser.parse_args()
    global RUNTIME
    RUNTIME = (options.runtime or RUNTIME).resolve()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # children inherit it
    sizes = [int(s) for s in options.sizes.split(",")]
    server_cpus, loadgen_cpus = ("0", "1") if options.pin else (None, None)
    extra = (
        {} if options.ping_interval is None else {"WS_PING_INTERVAL": f"{options.ping_interval:g}"}
    )
    fleet = Fleet(max(sizes), 2, server_cpus, options.backlog, extra)
    runs = []
    try:
        for size in sizes:
            flame = options.flame if options.flame and size == max(sizes) else None
            ramp = size / options.rate if options.rate else 0.0
            row = measure(fleet, size, options.procs, ramp, loadgen_cpus, flame)
            print(json.dumps(row), flush=True)
            runs.append(row)
            time.sleep(options.rest)
    finally:
        fleet.stop()
    document_path = HERE / "connect_latency.json"
    document = json.loads(document_path.read_text()) if document_path.is_file() else {"runs": {}}
    document["runs"][options.label] = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "note": options.note,
        "settings": {
            "procs": options.procs,
            "rate_per_s": options.rate,
            "pinned": "replicas+fronts on core 0, load generator on core 1"
            if options.pin
            else "none: replicas, fronts and load generator share both cores",
            "backlog": options.backlog,
            "server_runtime": str(RUNTIME),
            "ws_ping_interval": options.ping_interval,
            "open_files_per_process": hard,
            "cpus": os.cpu_count(),
        },
        "deploy": fleet.plan,
        "sizes": runs,
    }
    document_path.write_text(json.dumps(document, indent=2) + "\n")
    table = HERE / "connect_latency.md"
    text = table.read_text() if table.is_file() else ""
    kept = text[text.index(ANALYSIS) :] if ANALYSIS in text else ""
    table.write_text(markdown(document, kept))


ANALYSIS = "<!-- analysis: kept when the script rewrites the table -->"


def markdown(document: dict[str, Any], kept: str = "") -> str:
    lines = [
        "# Session start at 4,096 / 8,192 / 16,384 sessions through the rendered Envoy fronts",
        "",
        "Session start = TCP connect through Envoy + WebSocket upgrade + first `reset` answered. "
        "All sessions of a size are held open until the last has started. Written by "
        "`python benchmarks/scale/connect_latency.py`; 2 cores shared with other agents' work "
        "(load = one-minute load average before → after each size). CPU per session = "
        "replicas + fronts + load generator CPU seconds over the sessions; floor = all that "
        "CPU over the 2 cores: no start order finishes the last session sooner.",
        "",
        "| run | sessions | ramp | success | start p50 | start p99 | replicas CPU "
        "| fronts CPU | loadgen CPU | CPU / session | floor | listen overflows | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for label, run in document["runs"].items():
        cpus = run["settings"]["cpus"] or 1
        for row in run["sizes"]:
            cpu = row["cpu_s"]
            total = cpu["replicas"] + cpu["fronts"] + sum(cpu["loadgen"])
            lines.append(
                f"| {label} | {row['sessions']:,} | {row['ramp_s']:.0f} s | "
                f"{row['success']:.1%} | {_s(row['start_p50_ms'])} | {_s(row['start_p99_ms'])} | "
                f"{cpu['replicas']:.1f} s | {cpu['fronts']:.1f} s | "
                f"{' + '.join(f'{c:.1f}' for c in cpu['loadgen'])} s | "
                f"{total / row['sessions'] * 1000:.2f} ms | {total / cpus:.1f} s | "
                f"{row['kernel']['ListenOverflows']:,} | "
                f"{row['load_before']:.1f} → {row['load_after']:.1f} |"
            )
    lines += ["", "Runs:", ""]
    for label, run in document["runs"].items():
        settings = run["settings"]
        lines.append(
            f"- **{label}** ({run['measured_at']}): {run['note'] or 'as rendered'}; "
            f"{run['deploy']['fronts']} fronts × {run['deploy']['sessions_per_front']:,} "
            f"sessions, {settings['procs']} load-generator processes; pinning: "
            f"{settings['pinned']}."
        )
    return "\n".join(lines) + "\n\n" + (kept or ANALYSIS + "\n")


def _s(ms: float | None) -> str:
    return "–" if ms is None else f"{ms / 1000:.2f} s"


if __name__ == "__main__":
    main()
