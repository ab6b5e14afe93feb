"""Server RSS while many sessions are opened and closed: does memory come back?

    python benchmarks/server/session_memory.py                          # 20,000 sessions, 200 at a time
    python benchmarks/server/session_memory.py --env MALLOC_ARENA_MAX=2 --label arena2
    python benchmarks/server/session_memory.py --env OPENENV_GC_TUNING=0 --label gc-off

One server (``python -m openenv_runtime.serve openenv_cli.bench.bench_env:sync_app``, one
worker) takes rounds of ``--concurrency`` sessions, each: connect, reset, one step, close.
RSS (VmRSS of the server) is sampled every 2,000 sessions; the table shows the samples and
the growth after the first 2,000 (warm-up: the thread pool, caches). JSON goes to
``benchmarks/results/session-memory-<label>.json``. Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def session(url: str) -> None:
    async with connect(url) as conn:
        await conn.send('{"type":"reset"}')
        await conn.recv()
        await conn.send('{"type":"step","data":{}}')
        await conn.recv()


async def drive(url: str, pid: int, total: int, concurrency: int) -> list[tuple[int, float]]:
    samples = [(0, rss_mib(pid))]
    done = 0
    while done < total:
        await asyncio.gather(*(session(url) for _ in range(concurrency)))
        done += concurrency
        if done % 2000 < concurrency:
            samples.append((done, rss_mib(pid)))
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--env", action="append", default=[], help="K=V for the server")
    parser.add_argument("--label", default="default")
    args = parser.parse_args()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PORT": str(port), "LOG_LEVEL": "warning", "MAX_CONCURRENT_ENVS": "1000"}
    env.update(dict(item.split("=", 1) for item in args.env))
    server = subprocess.Popen(
        [sys.executable, "-m", "openenv_runtime.serve", "openenv_cli.bench.bench_env:sync_app"],
        cwd=ROOT,
        env=env,
    )
    try:
        for _ in range(150):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        samples = asyncio.run(
            drive(f"ws://127.0.0.1:{port}/ws", server.pid, args.sessions, args.concurrency)
        )
        time.sleep(2)
        samples.append((args.sessions, rss_mib(server.pid)))
    finally:
        server.terminate()
        server.wait(20)
    print(f"{'sessions':>9}  RSS MiB")
    for count, rss in samples:
        print(f"{count:>9}  {rss:7.1f}")
    warm = next((rss for count, rss in samples if count >= 2000), samples[0][1])
    summary = {
        "label": args.label,
        "env": args.env,
        "sessions": args.sessions,
        "concurrency": args.concurrency,
        "rss_start_mib": round(samples[0][1], 1),
        "rss_after_warmup_mib": round(warm, 1),
        "rss_end_mib": round(samples[-1][1], 1),
        "growth_after_warmup_kib_per_session": round(
            (samples[-1][1] - warm) * 1024 / max(args.sessions - 2000, 1), 3
        ),
        "note": "one worker; the machine's 2 cores were shared with other work",
    }
    for key, value in summary.items():
        print(f"{key:<38} {value}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"session-memory-{args.label}.json").write_text(
        json.dumps({**summary, "samples": samples}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
