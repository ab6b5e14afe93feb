"""``openenv collect`` / ``openenv eval``: throughput over concurrency, resume after kills, pass@k.

    python benchmarks/training/collect.py            # 1,000 episodes x 5 turns, the concurrency curve, 10 kills
    python benchmarks/training/collect.py --quick    # smaller counts

1. **Throughput.** A project made by ``openenv init`` served by ``openenv serve`` (pinned to
   core 0) and the stand-in model server ``python -m openenv_runtime.testing.stub_llm`` (core 1,
   answering each call after ``--model-latency`` seconds, 20 ms by default); the
   collection runs on core 1 too. Episodes per second for each ``--concurrency``, then the whole
   run (1,000 episodes x 5 model turns) through the CLI, wall time included start-up.
2. **Resume.** One collection killed with SIGKILL at 10 random moments, resumed each time,
   then finished: duplicate and missing episode ids counted.
3. **pass@k.** Bernoulli episodes with a known success probability: the estimator against the
   closed form 1 - C(n-c,k)/C(n,k) computed as a product (must agree within 1e-9), and the
   success rate's 95% interval against the true probability.

Prints a table and writes ``benchmarks/training/collect.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable


def free_port() -> int:
    from openenv_runtime.testing import free_port as port

    return port()


def wait_healthy(url: str, path: str = "/health", timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + path, timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def start(
    args: list[str], cpu: str, env: dict[str, str] | None = None, cwd: Path = REPO
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["taskset", "-c", cpu, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def collect_cli(
    env_url: str, llm_url: str, out: Path, episodes: int, concurrency: int, *extra: str
) -> list[str]:
    return [
        "taskset",
        "-c",
        "1",
        PY,
        "-m",
        "openenv_cli",
        "collect",
        env_url,
        "--llm",
        llm_url,
        "--model",
        "stub-model",
        "-n",
        str(episodes),
        "-c",
        str(concurrency),
        "--max-turns",
        "5",
        "--temperature",
        "0",
        "-o",
        str(out),
        "--json",
        *extra,
    ]


def throughput(
    env_url: str, llm_url: str, work: Path, grid: list[int], episodes: int
) -> list[dict[str, Any]]:
    rows = []
    for concurrency in grid:
        out = work / f"tp-{concurrency}"
        started = time.perf_counter()
        done = subprocess.run(
            collect_cli(env_url, llm_url, out, episodes, concurrency),
            capture_output=True,
            text=True,
            check=True,
        )
        wall = time.perf_counter() - started
        summary = json.loads(done.stdout)
        rows.append(
            {
                "concurrency": concurrency,
                "episodes": summary["written"],
                "errors": summary["errors"],
                "collect_seconds": summary["seconds"],
                "episodes_per_second": summary["episodes_per_second"],
                "wall_seconds_with_startup": round(wall, 2),
            }
        )
        print(
            f"  concurrency {concurrency:>3}: {summary['episodes_per_second']:>7.1f} episodes/s",
            flush=True,
        )
    return rows


def resume(env_url: str, llm_url: str, work: Path, episodes: int, kills: int) -> dict[str, Any]:
    from openenv_cli.collect.store import read_rows

    out = work / "resume"
    rng = random.Random(11)
    args = collect_cli(env_url, llm_url, out, episodes, 16, "--shard-size", "7")
    for attempt in range(kills):
        process = subprocess.Popen(
            args + (["--resume"] if attempt else []),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.5, 2.5))
        process.send_signal(signal.SIGKILL)
        process.wait()
    subprocess.run([*args, "--resume"], capture_output=True, check=True)
    ids = [row["episode_id"] for row in read_rows(out, columns=["episode_id"])]
    expected = {f"ep-{i:07d}" for i in range(episodes)}
    return {
        "episodes": episodes,
        "kills": kills,
        "rows": len(ids),
        "duplicates": len(ids) - len(set(ids)),
        "missing": len(expected - set(ids)),
    }


def pass_at_k_check(p: float, groups: int, n: int, ks: list[int]) -> dict[str, Any]:
    from openenv_cli.collect.episodes import new_row
    from openenv_cli.collect.spec import CollectSpec, plan
    from openenv_cli.collect.stats import summarize

    rng = random.Random(3)
    rows = []
    for item in plan(CollectSpec(targets=("x",), episodes=groups * n, group_size=n)):
        row = new_row(item)
        row["total_reward"] = 1.0 if rng.random() < p else 0.0
        rows.append(row)
    report = summarize(rows, ks, 1.0)
    worst = 0.0
    by_group: dict[str, list[bool]] = {}
    for row in rows:
        by_group.setdefault(row["group_id"], []).append(row["total_reward"] >= 1.0)
    for k in ks:
        # 1 - prod_{i=n-c+1}^{n} (1 - k/i): the closed form, computed another way.
        values = []
        for outcomes in by_group.values():
            c = sum(outcomes)
            prod = 1.0
            for i in range(n - c + 1, n + 1):
                prod *= 1.0 - k / i
            values.append(1.0 - prod if n - c >= k else 1.0)
        worst = max(worst, abs(sum(values) / len(values) - report["pass_at_k"][str(k)]))
    low, high = report["success_ci95"]
    return {
        "p": p,
        "groups": groups,
        "attempts_per_group": n,
        "estimator_max_abs_difference": worst,
        "success_rate": report["success_rate"],
        "success_ci95": [low, high],
        "p_inside_ci": low <= p <= high,
        "pass_at_k": report["pass_at_k"],
        "pass_at_k_population": {str(k): 1 - (1 - p) ** k for k in ks},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--model-latency",
        type=float,
        default=0.02,
        help="seconds the stand-in model takes per call",
    )
    parser.add_argument(
        "--out", type=Path, default=REPO / "benchmarks" / "training" / "collect.json"
    )
    options = parser.parse_args()
    episodes = 200 if options.quick else 1000
    grid = [1, 4, 16, 64] if options.quick else [1, 4, 16, 64, 128]
    curve_episodes = 100 if options.quick else 300
    kills = 3 if options.quick else 10
    work = Path(tempfile.mkdtemp(prefix="collect-bench-"))
    processes = []
    try:
        subprocess.run(
            [PY, "-m", "openenv_cli", "init", "bench_env", "-o", str(work)],
            check=True,
            capture_output=True,
        )
        env_port, llm_port = free_port(), free_port()
        env_url, llm_url = f"http://127.0.0.1:{env_port}", f"http://127.0.0.1:{llm_port}"
        processes.append(
            start(
                [
                    PY,
                    "-m",
                    "openenv_cli",
                    "serve",
                    str(work / "bench_env"),
                    "--port",
                    str(env_port),
                    "--max-concurrent-envs",
                    "512",
                ],
                "0",
                {"PYTHONPATH": str(work / "bench_env")},
            )
        )
        processes.append(
            start(
                [
                    *(PY, "-m", "openenv_runtime.testing.stub_llm", "--port", str(llm_port)),
                    *("--latency", str(options.model_latency)),
                ],
                "1",
            )
        )
        wait_healthy(env_url)
        wait_healthy(llm_url, "/v1/models")
        print("throughput (server on core 0; stand-in model and collect on core 1):", flush=True)
        curve = throughput(env_url, llm_url, work, grid, curve_episodes)
        best = max(curve, key=lambda r: r["episodes_per_second"])["concurrency"]
        started = time.perf_counter()
        done = subprocess.run(
            collect_cli(env_url, llm_url, work / "full", episodes, best),
            capture_output=True,
            text=True,
            check=True,
        )
        full = {
            "episodes": episodes,
            "turns": 5,
            "concurrency": best,
            "wall_seconds": round(time.perf_counter() - started, 2),
            **json.loads(done.stdout),
        }
        print(
            f"full run: {episodes} episodes x 5 turns at concurrency {best}: {full['wall_seconds']} s",
            flush=True,
        )
        resumed = resume(env_url, llm_url, work, 300 if options.quick else 600, kills)
        print(f"resume: {resumed}", flush=True)
    finally:
        for process in processes:
            stop(process)
        shutil.rmtree(work, ignore_errors=True)
    passk = pass_at_k_check(0.3, 500, 8, [1, 2, 4, 8])
    result = {
        "curve": curve,
        "full": full,
        "resume": resumed,
        "pass_at_k": passk,
        "cpu_count": os.cpu_count(),
    }
    print()
    print("| concurrency | episodes/s | errors |")
    print("|---:|---:|---:|")
    for row in curve:
        print(f"| {row['concurrency']} | {row['episodes_per_second']:.1f} | {row['errors']} |")
    print(
        f"\n{episodes}-episode run: {full['wall_seconds']} s wall (CLI start-up included), {full['errors']} errors"
    )
    print(
        f"resume after {resumed['kills']} SIGKILLs: {resumed['duplicates']} duplicates, {resumed['missing']} missing"
    )
    print(
        f"pass@k estimator vs closed form: max |diff| {passk['estimator_max_abs_difference']:.2e}; "
        f"p={passk['p']} inside success CI {passk['success_ci95']}: {passk['p_inside_ci']}"
    )
    options.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {options.out}")


if __name__ == "__main__":
    main()
