"""What counting one step for /metrics costs, against prometheus_client's own metric objects.

    python benchmarks/server/metrics_overhead.py

Per step the server reads the clock twice and adds to its plain per-worker tally
(``server/metrics.py``). The alternative, a ``prometheus_client`` Counter and Histogram per
step, is timed in this process (in-process values) and in a child process with
``PROMETHEUS_MULTIPROC_DIR`` set (memory-mapped values, what ``--workers N`` would need).
Results: ``benchmarks/server/metrics_overhead.md``. The same-run price on the hot path is the pair
``generated`` / ``generated-nometrics`` of ``benchmarks/server/hot_path.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
N = 200_000


def tally_cost() -> float:
    from time import perf_counter

    from openenv_runtime.server.metrics import WS_OK, Tally

    tally = Tally()

    def hook() -> None:
        start = perf_counter()
        tally.step(WS_OK, perf_counter() - start)

    return min(timeit.repeat(hook, number=N, repeat=5)) / N * 1e6


def client_cost() -> float:
    from time import perf_counter

    from prometheus_client import Counter, Histogram

    steps = Counter("bench_steps", "steps", ["transport", "outcome"]).labels("ws", "ok")
    latency = Histogram("bench_step_seconds", "latency")

    def hook() -> None:
        start = perf_counter()
        steps.inc()
        latency.observe(perf_counter() - start)

    return min(timeit.repeat(hook, number=N, repeat=5)) / N * 1e6


def main() -> None:
    if sys.argv[1:] == ["--client"]:
        print(json.dumps(client_cost()))
        return
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": folder}
        out = subprocess.run(
            [sys.executable, __file__, "--client"], env=env, check=True, capture_output=True
        )
        multiprocess = float(out.stdout)
    rows = {
        "plain tally (server/metrics.py)": tally_cost(),
        "prometheus_client Counter + Histogram": client_cost(),
        "the same, multiprocess mode": multiprocess,
    }
    load = os.getloadavg()
    lines = [
        "# Cost of counting one step for /metrics",
        "",
        f"`python benchmarks/server/metrics_overhead.py`, best of 5 × {N:,} steps; "
        f"load average {load[0]:.1f} on {os.cpu_count()} cores (a shared machine).",
        "",
        "| per step | µs |",
        "|---|---:|",
        *(f"| {name} | {cost:.2f} |" for name, cost in rows.items()),
    ]
    text = "\n".join(lines) + "\n"
    (ROOT / "benchmarks" / "server" / "metrics_overhead.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
