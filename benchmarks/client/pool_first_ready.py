"""First-ready (``send``/``recv``) against lockstep (``step``) ``EnvPool`` stepping.

    python benchmarks/client/pool_first_ready.py                  # about a minute
    python benchmarks/client/pool_first_ready.py --seconds 5 --rounds 3

Two questions, one benchmark server (``openenv_cli.bench.bench_env:app``: ``step`` awaits
``asyncio.sleep(wait)``) pinned to core 0 and this process (the client) pinned to core 1:

* **heavy tail** — every action's ``wait`` is drawn from a lognormal distribution with a
  median of 20 ms and a 99th percentile of 500 ms (sigma = ln(25) / z(0.99)), 64 slots.
  Lockstep waits for the slowest slot of every batch; first-ready hands back whatever is done
  (``recv(min_results=1)``) and sends those slots their next action at once. Steps/s of each.
* **equal latency** — every ``wait`` is the same (``--equal-wait``, default 0: the server
  answers as fast as it can). Client CPU per step (this process's CPU time / steps) of each,
  so the bookkeeping of first-ready is seen on its own.

Both modes draw from the same seeded generator and run in rotation for ``--rounds`` rounds
(medians are reported; the ratios are the median of each round's pair), so drift of a shared machine hits them alike. Prints a
table and writes ``benchmarks/results/pool-first-ready-<timestamp>.json`` (ignored by git)
and ``benchmarks/client/pool_first_ready.json`` (committed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from openenv_cli.bench.bench_env import BenchAction, BenchObservation  # noqa: E402
from openenv_cli.bench.report import markdown_table  # noqa: E402
from openenv_cli.bench.server import bench_server  # noqa: E402
from openenv_runtime import EnvClient, EnvPool, State, StepResult  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
SERVER_CPU, CLIENT_CPU = 0, 1
Z99 = 2.3263478740408408  # the standard normal's 99th percentile


class BenchClient(EnvClient[BenchAction, BenchObservation, State]):
    pass


def lognormal_waits(median: float, p99: float, seed: int) -> Any:
    sigma = math.log(p99 / median) / Z99
    rng = random.Random(seed)
    mu = math.log(median)
    return lambda: rng.lognormvariate(mu, sigma)


async def run_mode(
    mode: str, url: str, size: int, seconds: float, draw: Any, min_results: int
) -> dict[str, float]:
    async with EnvPool(BenchClient, urls=[url], size=size) as pool:
        await pool.reset()
        steps = failures = 0
        if mode == "lockstep":
            await pool.step([BenchAction(wait=draw()) for _ in range(size)])  # warm-up
            cpu, began = time.process_time(), time.perf_counter()
            while time.perf_counter() - began < seconds:
                results = await pool.step([BenchAction(wait=draw()) for _ in range(size)])
                for result in results:
                    if isinstance(result, StepResult):
                        steps += 1
                    else:
                        failures += 1
        else:
            await pool.send(range(size), [BenchAction(wait=draw()) for _ in range(size)])
            cpu, began = time.process_time(), time.perf_counter()
            while time.perf_counter() - began < seconds:
                ready = await pool.recv(min_results=min_results)
                for _, result in ready:
                    if isinstance(result, StepResult):
                        steps += 1
                    else:
                        failures += 1
                await pool.send([i for i, _ in ready], [BenchAction(wait=draw()) for _ in ready])
            elapsed = time.perf_counter() - began
            used = time.process_time() - cpu
            while pool.in_flight:
                await pool.recv(min_results=len(pool.in_flight))
            return _figures(steps, failures, elapsed, used)
        return _figures(steps, failures, time.perf_counter() - began, time.process_time() - cpu)


def _figures(steps: int, failures: int, elapsed: float, cpu: float) -> dict[str, float]:
    return {
        "steps": steps,
        "failures": failures,
        "steps_per_s": steps / elapsed,
        "cpu_us_per_step": cpu / max(steps, 1) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per run")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--median", type=float, default=0.020, help="heavy tail: median wait (s)")
    parser.add_argument("--p99", type=float, default=0.500, help="heavy tail: p99 wait (s)")
    parser.add_argument("--equal-wait", type=float, default=0.0, help="equal latency: wait (s)")
    parser.add_argument("--min-results", type=int, default=1, help="first-ready recv() size")
    parser.add_argument("--note", default="", help="free text stored with the results")
    args = parser.parse_args()

    pinned = hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1
    if pinned:
        os.sched_setaffinity(0, {CLIENT_CPU})
    runs: dict[str, list[dict[str, float]]] = {
        f"{load} {mode}": []
        for load in ("heavy-tail", "equal")
        for mode in ("lockstep", "first-ready")
    }
    with bench_server(cpus=[SERVER_CPU] if pinned else None) as server:
        for r in range(args.rounds):
            for name in runs:
                load, mode = name.split()
                if load == "heavy-tail":
                    draw = lognormal_waits(args.median, args.p99, seed=r)
                else:
                    draw = lambda: args.equal_wait  # noqa: E731
                figures = asyncio.run(
                    run_mode(mode, server.url, args.slots, args.seconds, draw, args.min_results)
                )
                runs[name].append(figures)
                print(
                    f"round {r + 1} {name}: {figures['steps_per_s']:.0f} steps/s, "
                    f"{figures['cpu_us_per_step']:.1f} µs CPU/step",
                    file=sys.stderr,
                )

    median = {
        name: {key: statistics.median(f[key] for f in rounds) for key in rounds[0]}
        for name, rounds in runs.items()
    }
    # Each round's first-ready run against the same round's lockstep run (they ran back to
    # back, so they saw the same load on the shared machine); the median of those ratios.
    speedups = [
        f["steps_per_s"] / ls["steps_per_s"]
        for f, ls in zip(runs["heavy-tail first-ready"], runs["heavy-tail lockstep"], strict=True)
    ]
    cpu_ratios = [
        f["cpu_us_per_step"] / ls["cpu_us_per_step"]
        for f, ls in zip(runs["equal first-ready"], runs["equal lockstep"], strict=True)
    ]
    speedup = statistics.median(speedups)
    cpu_ratio = statistics.median(cpu_ratios)
    rows = [
        [
            name,
            f"{m['steps_per_s']:.0f}",
            f"{m['cpu_us_per_step']:.1f}",
            f"{int(m['failures'])}",
        ]
        for name, m in median.items()
    ]
    print(markdown_table(["run", "steps/s", "client µs CPU/step", "failures"], rows))
    print(
        f"\nheavy tail: first-ready / lockstep = {speedup:.2f}× steps/s (goal ≥ 2×)\n"
        f"equal latency: first-ready / lockstep = {cpu_ratio:.3f}× client CPU per step "
        "(goal ≤ 1.10×)"
    )
    report = {
        "benchmark": "pool_first_ready",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": {
            **{k: v for k, v in vars(args).items() if k != "note"},
            "client_cpu": CLIENT_CPU if pinned else None,
            "server_cpu": SERVER_CPU if pinned else None,
            "sigma": math.log(args.p99 / args.median) / Z99,
        },
        "note": args.note,
        "median": median,
        "rounds": runs,
        "heavy_tail_speedup": speedup,
        "heavy_tail_speedup_per_round": speedups,
        "equal_latency_cpu_ratio": cpu_ratio,
        "equal_latency_cpu_ratio_per_round": cpu_ratios,
        "goals_met": {"speedup_2x": speedup >= 2.0, "cpu_within_10pct": cpu_ratio <= 1.10},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    for path in (
        RESULTS / f"pool-first-ready-{stamp}.json",
        ROOT / "benchmarks" / "client" / "pool_first_ready.json",
    ):
        path.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
