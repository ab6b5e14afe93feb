"""``openenv collect`` with a model: wall time and the collecting process's CPU per model call.

    python benchmarks/training/collect_model_calls.py                  # 1,000 episodes x 5 turns
    python benchmarks/training/collect_model_calls.py --episodes 200   # quicker

A project made by ``openenv init``, served by ``openenv serve``, and the stand-in model server
(``python -m openenv_runtime.testing.stub_llm``, answering at once); ``openenv collect`` runs
the episodes at ``--concurrency`` with a model policy (5 turns each: the project's echo
environment never ends an episode early). Reported: wall time of the whole command (start-up
included), and the user+system CPU seconds of the collect process, per model call too (read
from ``resource.getrusage(RUSAGE_CHILDREN)``, so a busy machine changes the wall time more
than the CPU). Run it from two checkouts (``PYTHONPATH``) to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

PY = sys.executable
REPO = Path(__file__).resolve().parents[2]


def _wait(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def _quiet(args: list[str], env: dict[str, str] | None) -> subprocess.Popen[bytes]:
    out = subprocess.DEVNULL
    return subprocess.Popen(args, env=env, stdout=out, stderr=out)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


def main() -> None:
    from openenv_runtime.testing import free_port

    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--out", type=Path, default=None, help="append the result (JSON line)")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="collect-calls-"))
    servers: list[subprocess.Popen[bytes]] = []
    try:
        subprocess.run(
            [PY, "-m", "openenv_cli", "init", "bench_env", "-o", str(work)],
            check=True,
            capture_output=True,
        )
        env_port, llm_port = free_port(), free_port()
        env = {
            **os.environ,
            "PYTHONPATH": f"{work / 'bench_env'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        }
        serve = [PY, "-m", "openenv_cli", "serve", str(work / "bench_env"), "--port", str(env_port)]
        servers.append(_quiet([*serve, "--max-concurrent-envs", "512"], env))
        stub = [PY, "-m", "openenv_runtime.testing.stub_llm", "--port", str(llm_port)]
        servers.append(_quiet(stub, None))
        _wait(f"http://127.0.0.1:{env_port}/health")
        _wait(f"http://127.0.0.1:{llm_port}/v1/models")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(
            [
                *(PY, "-m", "openenv_cli", "collect", f"http://127.0.0.1:{env_port}"),
                *("--llm", f"http://127.0.0.1:{llm_port}", "--model", "stub-model"),
                *("-n", str(options.episodes), "-c", str(options.concurrency)),
                *("--max-turns", "5", "--temperature", "0", "-o", str(work / "out"), "--json"),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        for process in servers:
            _stop(process)
        shutil.rmtree(work, ignore_errors=True)
    summary = json.loads(done.stdout)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    calls = options.episodes * 5
    result = {
        "episodes": options.episodes,
        "turns": 5,
        "concurrency": options.concurrency,
        "errors": summary["errors"],
        "wall_seconds": round(wall, 2),
        "collect_cpu_seconds": round(cpu, 2),
        "cpu_ms_per_model_call": round(cpu / calls * 1000, 3),
        "load_average_1m": os.getloadavg()[0],
        "cpu_count": os.cpu_count(),
    }
    print(json.dumps(result))
    if options.out:
        with options.out.open("a") as handle:
            handle.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
