"""Gymnasium through the server: exactness against the library, and speed against its vector envs.

    python benchmarks/environments/adapters_gymnasium.py                   # about a minute
    python benchmarks/environments/adapters_gymnasium.py --episodes 200 --seconds 3

* **exactness** — ``gymnasium:CartPole-v1`` served by ``python -m openenv_runtime.serve``;
  ``openenv_runtime.gym.make_vec`` over ``--exact-envs`` sessions beside Gymnasium's own
  ``SyncVectorEnv`` of as many ``gymnasium.make`` copies, the same seeds at the first reset
  (env i: seed i), the same random actions, autoreset ``NEXT_STEP`` (later episodes continue
  each environment's generator, as the library's do), until ``--episodes`` episodes ended.
  Counted: steps whose observation, reward, ``terminated`` or ``truncated`` differ in any env.
* **speed** — 64 environments (``--envs``), random actions, steps/s (environment steps, i.e.
  vector steps × envs) over ``--seconds``: through the server by ``make_vec`` over one vector
  session (one message a vector step, the default), the same over two servers (32
  environments on each, both batches sent at once: the two cores work at once), by ``make_vec(batched=False)`` (one
  session per environment, the runtime's ``EnvPool``: what a server without vector sessions
  gets) and by the raw pool (``EnvPool.step`` with dict actions, no numpy conversion), against
  Gymnasium's ``AsyncVectorEnv`` (one subprocess per copy) and ``SyncVectorEnv``. ``--rounds``
  rounds, each running every contender in turn (interleaved, so a shared machine's load
  weighs on all alike); each round's ratio to ``AsyncVectorEnv`` is kept and the median
  reported. The machine's load average is reported beside (the machine may be shared).

Prints a table and writes ``benchmarks/results/adapters_gymnasium-<timestamp>.json`` (ignored by
git) and ``benchmarks/environments/adapters_gymnasium.json`` (committed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import psutil
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from openenv_cli.bench.report import markdown_table  # noqa: E402
from openenv_cli.bench.server import ServerProcess, serve_command  # noqa: E402
from openenv_runtime import EnvPool, GenericEnvClient, gym  # noqa: E402
from openenv_runtime.testing import free_port  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
ENV_ID = "CartPole-v1"
VECTOR = "server (gym.make_vec, one vector session)"
ASYNC = "gymnasium AsyncVectorEnv"
TWO = "2 servers (gym.make_vec, a vector session on each, 32 envs each)"


def server(workers: int) -> ServerProcess:
    port = free_port()
    return ServerProcess(
        serve_command(f"gymnasium:{ENV_ID}", port, workers=workers),
        port,
        env={
            "PYTHONPATH": f"{ROOT / 'runtime'}:{ROOT}",
            "LOG_LEVEL": "warning",
            "ENABLE_WEB_INTERFACE": "false",
        },
    )


def exactness(url: str, episodes: int, n: int, *, batched: bool) -> dict[str, Any]:
    remote = gym.make_vec(url, n, autoreset_mode=AutoresetMode.NEXT_STEP, batched=batched)
    native = SyncVectorEnv([lambda: gymnasium.make(ENV_ID) for _ in range(n)])
    rng = np.random.default_rng(0)
    differences = steps = ended = 0
    try:
        got, want = remote.reset(seed=list(range(n))), native.reset(seed=list(range(n)))
        differences += int(not np.array_equal(got[0], want[0]))
        while ended < episodes:
            actions = rng.integers(0, 2, size=n)
            a, b = remote.step(actions), native.step(actions)
            steps += 1
            same = a[0].dtype == b[0].dtype and all(
                np.array_equal(x, y) for x, y in zip(a[:4], b[:4], strict=True)
            )
            differences += int(not same)
            ended += int(np.sum(b[2] | b[3]))
    finally:
        remote.close()
        native.close()
    return {
        "episodes": ended,
        "envs": n,
        "vector_steps": steps,
        "env_steps": steps * n,
        "differences": differences,
    }


def timed(step: Any, n: int, seconds: float) -> dict[str, Any]:
    """Steps/s of ``step(actions)`` for ``seconds`` after a short warm-up."""
    rng = np.random.default_rng(1)
    for _ in range(20):
        step(rng.integers(0, 2, size=n))
    count, cpu0, start = 0, time.process_time(), time.perf_counter()
    while time.perf_counter() - start < seconds:
        step(rng.integers(0, 2, size=n))
        count += 1
    elapsed = time.perf_counter() - start
    return {
        "steps_per_s": count * n / elapsed,
        "vector_steps": count,
        "env_steps": count * n,
        "seconds": elapsed,
        "driver_cpu_s": time.process_time() - cpu0,
    }


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and its children."""
    root = psutil.Process(pid)
    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        times = proc.cpu_times()
        total += times.user + times.system
    return total


def with_server_cpu(pids: int | list[int], measure: Any) -> dict[str, Any]:
    """``measure()`` with the CPU the servers ``pids`` spent, and the total with the driver's,
    per environment step (a figure the machine's load changes little)."""
    pids = [pids] if isinstance(pids, int) else pids
    before = sum(tree_cpu(pid) for pid in pids)
    run: dict[str, Any] = measure()
    server = sum(tree_cpu(pid) for pid in pids) - before
    run["server_cpu_us_per_step"] = server / run["env_steps"] * 1e6
    if "driver_cpu_s" in run:
        total = server + run["driver_cpu_s"]
        run["total_cpu_us_per_step"] = total / run["env_steps"] * 1e6
    return run


def speed_make_vec(url: str | list[str], n: int, seconds: float, batched: bool) -> dict[str, Any]:
    envs = gym.make_vec(url, n, batched=batched)
    try:
        envs.reset(seed=list(range(n)))
        return timed(envs.step, n, seconds)
    finally:
        envs.close()


def speed_pool(url: str, n: int, seconds: float) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async with EnvPool(GenericEnvClient, urls=[url], size=n) as pool:
            await pool.reset(seeds=list(range(n)))
            rng = np.random.default_rng(1)
            count, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                actions = [{"action": int(a)} for a in rng.integers(0, 2, size=n)]
                results = await pool.step(actions)
                ended = [i for i, r in enumerate(results) if getattr(r, "done", False)]
                if ended:  # lockstep: reset the ended ones in the next batch's place
                    await asyncio.gather(*(pool[i].reset() for i in ended))
                count += 1
            elapsed = time.perf_counter() - start
            return {
                "steps_per_s": count * n / elapsed,
                "vector_steps": count,
                "env_steps": count * n,
                "seconds": elapsed,
            }

    return asyncio.run(run())


def speed_native(kind: str, n: int, seconds: float) -> dict[str, Any]:
    fns = [lambda: gymnasium.make(ENV_ID) for _ in range(n)]
    envs: Any = AsyncVectorEnv(fns) if kind == "async" else SyncVectorEnv(fns)
    try:
        envs.reset(seed=list(range(n)))
        workers = psutil.Process().children(recursive=True)
        before = sum(sum(p.cpu_times()[:2]) for p in workers)
        run = timed(envs.step, n, seconds)
        spent = sum(sum(p.cpu_times()[:2]) for p in workers) - before + run["driver_cpu_s"]
        run["total_cpu_us_per_step"] = spent / run["env_steps"] * 1e6
        return run
    finally:
        envs.close()


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median steps/s among ``runs`` (one per round)."""
    ordered = sorted(runs, key=lambda run: run["steps_per_s"])
    return dict(ordered[(len(ordered) - 1) // 2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--exact-envs", type=int, default=32)
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--workers", type=int, default=1, help="server worker processes")
    args = parser.parse_args()
    load_before = os.getloadavg()
    report: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "gymnasium": gymnasium.__version__,
        "cpus": os.cpu_count(),
        "server_workers": args.workers,
    }
    with server(args.workers) as srv, server(args.workers) as second:
        url = f"http://127.0.0.1:{srv.port}"
        both = [url, f"http://127.0.0.1:{second.port}"]
        report["exactness"] = exactness(url, args.episodes, args.exact_envs, batched=True)
        report["exactness_session_per_env"] = exactness(
            url, args.episodes, args.exact_envs, batched=False
        )
        assert srv.process is not None
        pid = srv.process.pid
        assert second.process is not None
        pids = [pid, second.process.pid]
        contenders: dict[str, Any] = {
            VECTOR: lambda: with_server_cpu(
                pid, lambda: speed_make_vec(url, args.envs, args.seconds, batched=True)
            ),
            ASYNC: lambda: speed_native("async", args.envs, args.seconds),
            TWO: lambda: with_server_cpu(
                pids, lambda: speed_make_vec(both, args.envs, args.seconds, batched=True)
            ),
            "server (gym.make_vec, a session per env)": lambda: with_server_cpu(
                pid, lambda: speed_make_vec(url, args.envs, args.seconds, batched=False)
            ),
            "server (raw EnvPool.step)": lambda: with_server_cpu(
                pid, lambda: speed_pool(url, args.envs, args.seconds)
            ),
            "gymnasium SyncVectorEnv": lambda: speed_native("sync", args.envs, args.seconds),
        }
        rounds: list[dict[str, Any]] = []
        for _ in range(args.rounds):
            one = {"load_average": os.getloadavg()}
            for name, measure in contenders.items():
                one[name] = measure()
            rounds.append(one)
    speed = {name: median_run([r[name] for r in rounds]) for name in contenders}
    for name in contenders:
        ratios = [r[name]["steps_per_s"] / r[ASYNC]["steps_per_s"] for r in rounds]
        speed[name]["vs_async_per_round"] = ratios
        speed[name]["vs_async_median"] = statistics.median(ratios)
    report["speed"] = {"envs": args.envs, "rounds": args.rounds, "runs": speed}
    report["load_average"] = {
        "before": load_before,
        "per_round": [r["load_average"] for r in rounds],
        "after": os.getloadavg(),
    }

    for key in ("exactness", "exactness_session_per_env"):
        exact = report[key]
        print(
            f"{key}: {exact['episodes']} episodes, {exact['env_steps']} env steps "
            f"({exact['envs']} envs), {exact['differences']} differences"
        )
    rows = [
        [
            name,
            f"{run['steps_per_s']:,.0f}",
            f"{run['vs_async_median']:.2f}×",
            f"{run['server_cpu_us_per_step']:.0f}" if "server_cpu_us_per_step" in run else "",
            f"{run['total_cpu_us_per_step']:.0f}" if "total_cpu_us_per_step" in run else "",
        ]
        for name, run in speed.items()
    ]
    headers = [
        f"{args.envs} × {ENV_ID}",
        "steps/s (median)",
        "vs AsyncVectorEnv (median of rounds)",
        "server CPU µs/step",
        "all CPU µs/step",
    ]
    print(markdown_table(headers, rows))
    print(f"load average before {load_before}, after {report['load_average']['after']}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    text = json.dumps(report, indent=2) + "\n"
    (RESULTS / f"adapters_gymnasium-{stamp}.json").write_text(text)
    (ROOT / "benchmarks" / "environments" / "adapters_gymnasium.json").write_text(text)


if __name__ == "__main__":
    main()
