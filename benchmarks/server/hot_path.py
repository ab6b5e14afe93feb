"""Server CPU per step of a generated environment against the floor and both references.

    python benchmarks/server/hot_path.py                  # 3 rotations, about 2 minutes
    python benchmarks/server/hot_path.py --rounds 1 --steps 200

Servers (all started at once; an idle one costs nothing):

* ``floor`` — ``benchmarks/server/floor_app.py``: a bare ASGI WebSocket echo on the same uvicorn;
* ``floor-inline`` — the same echo answering steps in the WebSocket protocol, below ASGI, as the
  runtime answers a cheap plain ``step()`` (``floor_app:inline_app``): the floor of that shortcut;
* ``generated`` — the environment ``openenv init`` writes (templates/project: a plain ``def
  step`` echoing ``message``), served by ``python -m openenv_runtime.serve``;
* ``bench`` — the built-in benchmark environment (``async def step``, action ``{"wait": 0}``);
* ``reference`` — openenv-core 0.3.0 (``ref_echo_server.py --env bench``) in its own virtualenv;
* ``reference10`` — openenv 0.10.0 serving the same echo environment as ``generated``
  (``ref10_server.py --kind plain``) in its own virtualenv.

Each round measures every server in turn (rotated: A B C, B C A, ...) with 64 sessions doing
K back-to-back steps over WebSocket, then the servers that have HTTP sessions with 16 sessions
over ``POST /step``. The measured server is pinned to core 0 and the load generator (one
process) to core 1; server CPU is the kernel's user+system time of its process tree. Ratios to
the floor are taken within a round, then the median over rounds is reported. Results:
``benchmarks/server/hot_path_latest.{json,md}`` and ``benchmarks/results/hot-path-<timestamp>.json`` (ignored by git).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT, ROOT / "benchmarks" / "server"):
    sys.path.insert(0, str(extra))  # first, even when an editable install lists it later

from compare_measure import _throughput_cell, make_server  # noqa: E402

from openenv_cli.bench.loadgen import LoadGenerator  # noqa: E402
from openenv_cli.bench.server import BENCH_ENV, ServerProcess, pin_tree  # noqa: E402
from openenv_cli.bench.target import Target  # noqa: E402
from openenv_cli.bench.worker import raise_open_file_limit  # noqa: E402
from openenv_cli.scaffold import render_project  # noqa: E402
from openenv_runtime.testing import free_port  # noqa: E402

SERVERS = (
    "floor", "floor-inline", "generated", "generated-nometrics", "bench", "reference", "reference10"
)  # fmt: skip
HTTP_SERVERS = ("generated", "generated-nometrics", "bench", "reference", "reference10")
ECHO = {"message": "hello world"}
OUT = ROOT / "benchmarks" / "server"


def generated_server(workdir: Path, metrics: bool = True) -> ServerProcess:
    """The project ``openenv init hot_echo`` writes, served from ``workdir``; ``metrics=False``
    serves it with ``OPENENV_METRICS=0`` (no /metrics, no per-step counting), the
    ``generated-nometrics`` server that prices the metrics in the same run."""
    for relative, text in render_project("hot_echo").items():
        path = workdir / "hot_echo" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "openenv_runtime.serve",
        "hot_echo.server.app:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    # this checkout's runtime, whatever an editable install points at; the caller's path after
    path = os.pathsep.join(
        p for p in (str(workdir), str(ROOT / "runtime"), os.environ.get("PYTHONPATH", "")) if p
    )
    env = {**BENCH_ENV, "PYTHONPATH": path, "MAX_CONCURRENT_ENVS": "1000"}
    if not metrics:
        env["OPENENV_METRICS"] = "0"
    return ServerProcess(
        argv, port, env=env, name="generated" if metrics else "generated-nometrics"
    )


def reference10_server() -> ServerProcess:
    from tests.support.reference import SCRIPTS_DIR, openenv_python

    port = free_port()
    argv = [
        str(openenv_python()),
        str(SCRIPTS_DIR / "ref10_server.py"),
        "--port",
        str(port),
        "--kind",
        "plain",
        "--max-concurrent-envs",
        "1000",
    ]
    return ServerProcess(argv, port, name="reference10", cwd=str(SCRIPTS_DIR))


def start(name: str, workdir: Path) -> ServerProcess:
    if name in ("generated", "generated-nometrics"):
        server = generated_server(workdir, metrics=name == "generated")
    elif name == "reference10":
        server = reference10_server()
    else:
        server = make_server("ours" if name == "bench" else name, 1)
    server.start()
    server.wait_healthy(180)
    return server


def target(name: str, server: ServerProcess, transport: str) -> Target:
    echo = name in ("generated", "generated-nometrics", "reference10")
    return Target.parse(
        server.url,
        transport=transport,
        action=ECHO if echo else None,
        wait_field=not echo,
        compression=True,
    )


def cell(
    server: ServerProcess, tgt: Target, lg: LoadGenerator, sessions: int, steps: int
) -> dict[str, Any]:
    measured, other_cores = _throughput_cell(server, tgt, lg, sessions, steps, rep=1)
    return {
        "server_cpu_us_per_step": measured.server_cpu_us_per_step,
        "steps_per_s": measured.steps_per_s,
        "success": measured.success_rate,
        "other_cores": other_cores,
    }


def run(rounds: int, steps: int, http_steps: int, names: list[str]) -> dict[str, Any]:
    pinned = (os.cpu_count() or 1) >= 2
    servers: dict[str, ServerProcess] = {}
    cells: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="openenv-hot-path-") as tmp:
        try:
            for name in names:
                print(f"starting {name}", file=sys.stderr, flush=True)
                servers[name] = start(name, Path(tmp))
                pin_tree(servers[name].pids, [0] if pinned else [])
            plan = [(n, "ws", 64, steps) for n in names]
            plan += [(n, "http", 16, http_steps) for n in names if n in HTTP_SERVERS]
            with LoadGenerator(1, [1] if pinned else None) as lg:
                for name, transport, sessions, _ in plan:  # warm-up, not measured
                    lg.throughput(target(name, servers[name], transport), sessions, 20, 0.0, 60)
                for rnd in range(rounds):
                    shift = rnd % len(plan)
                    for name, transport, sessions, count in plan[shift:] + plan[:shift]:
                        print(f"round {rnd + 1}: {name} {transport}", file=sys.stderr, flush=True)
                        one = cell(
                            servers[name],
                            target(name, servers[name], transport),
                            lg,
                            sessions,
                            count,
                        )
                        cells.setdefault(f"{name}/{transport}", []).append(one)
        finally:
            for server in servers.values():
                server.stop()
    return summarize(cells, rounds)


def _ratios(cpu: list[float | None], floor: list[dict[str, Any]]) -> list[float]:
    """Each round's CPU over the same round's floor."""
    return [
        c / f["server_cpu_us_per_step"]
        for c, f in zip(cpu, floor, strict=False)
        if c is not None and f["server_cpu_us_per_step"]
    ]


def summarize(cells: dict[str, list[dict[str, Any]]], rounds: int) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    floor = cells.get("floor/ws", [])
    inline_floor = cells.get("floor-inline/ws", [])
    for key, measured in cells.items():
        cpu = [c["server_cpu_us_per_step"] for c in measured]
        ratios = _ratios(cpu, floor)
        inline_ratios = _ratios(cpu, inline_floor)
        rows[key] = {
            "server_cpu_us_per_step": statistics.median(x for x in cpu if x is not None),
            "per_round_us": cpu,
            "over_floor_per_round": ratios,
            "over_floor": statistics.median(ratios) if ratios else None,
            "over_inline_floor": statistics.median(inline_ratios) if inline_ratios else None,
            "steps_per_s": statistics.median(c["steps_per_s"] for c in measured),
            "success": min(c["success"] for c in measured),
            "other_cores_max": max(c["other_cores"] for c in measured),
        }
    return {"rounds": rounds, "rows": rows}


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        "# Hot path: server CPU per step (generated environment vs. the floor)",
        "",
        f"Measured {doc['started_at']} with `python benchmarks/server/hot_path.py` "
        f"({doc['rounds']} rounds, {doc['steps']} steps × 64 sessions over WebSocket, "
        f"{doc['http_steps']} × 16 over HTTP). Server pinned to core 0, load generator to core 1; "
        "other tenants of the machine ran meanwhile (column 'other cores', max over rounds).",
        "",
        "| server / transport | CPU µs per step (median) | per round | ÷ floor (median of rounds) | ÷ inline floor | steps/s | success | other cores |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for key, row in doc["rows"].items():
        ratio, inline = row["over_floor"], row.get("over_inline_floor")
        lines.append(
            f"| {key} | {row['server_cpu_us_per_step']:.1f} | "
            + ", ".join(f"{x:.1f}" for x in row["per_round_us"] if x is not None)
            + f" | {'–' if ratio is None else f'{ratio:.2f}×'}"
            + f" | {'–' if inline is None else f'{inline:.2f}×'} | {row['steps_per_s']:,.0f} | "
            f"{row['success']:.0%} | {row['other_cores_max']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=400, help="WebSocket steps per session")
    parser.add_argument("--http-steps", type=int, default=200, help="HTTP steps per session")
    parser.add_argument("--servers", default=",".join(SERVERS))
    parser.add_argument("--label", default="latest", help="hot_path_<label>.{json,md}")
    args = parser.parse_args(argv)
    raise_open_file_limit()
    names = [n for n in args.servers.split(",") if n]
    stamp = datetime.now(UTC)
    started = time.monotonic()
    doc = {
        "started_at": stamp.isoformat(timespec="seconds"),
        "rounds": args.rounds,
        "steps": args.steps,
        "http_steps": args.http_steps,
        "cpus": os.cpu_count(),
        **run(args.rounds, args.steps, args.http_steps, names),
    }
    doc["duration_s"] = time.monotonic() - started
    text = markdown(doc)
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    data = json.dumps(doc, indent=2) + "\n"
    (results / f"hot-path-{stamp.strftime('%Y%m%d-%H%M%S')}.json").write_text(data)
    (OUT / f"hot_path_{args.label}.json").write_text(data)
    (OUT / f"hot_path_{args.label}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
