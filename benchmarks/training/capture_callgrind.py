"""Instructions per call of the capture proxy, under callgrind: a measure other tenants cannot move.

    python benchmarks/training/capture_callgrind.py
    python benchmarks/training/capture_callgrind.py --floor --compare before=/tmp/before

``rollouts.py --parts overhead`` measures the proxy's CPU time per call, which on a shared
machine moves with the load by more than the changes it is meant to show. The instructions
the proxy's process executes for the same calls do not. The stand-in model server
(``say_policy``) runs natively; ``openenv capture`` runs under
``valgrind --tool=callgrind --instr-atstart=no``. After a warm-up, instrumentation is switched
on for the measured phase of ``rollouts_overhead``'s load: ``--sessions`` sessions, each making
``--calls`` chat completions ``--pace`` seconds apart, then reading its entries back and
ending. Reported: user-space instructions (Ir) of the proxy per call, session routes and
read-back included. Kernel time (the socket calls, the wake-ups) is not counted.

``--floor`` counts ``raw_forwarder.py``'s instructions for the same calls: a byte-for-byte
forwarder on the same event loop, which parses and records nothing (its CPU time per call is
``rollouts.py --floor``'s floor). ``--compare NAME=DIR`` measures the checkout in ``DIR`` too
(its ``runtime/`` and CLI first on the proxy's ``PYTHONPATH``), e.g. ``git worktree add
/tmp/before HEAD~3``. The result goes to ``benchmarks/training/capture_callgrind.json``.
Needs ``valgrind``; takes a few minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
OUT = HERE / "capture_callgrind.json"
sys.path[:0] = [str(ROOT), str(HERE)]

from rollouts_overhead import exited, phase  # noqa: E402

from benchmarks.server.callgrind import MISSING, available, control, instructions, valgrind  # noqa: E402
from openenv_runtime.providers.base import wait_until_healthy  # noqa: E402
from openenv_runtime.testing.running import free_port  # noqa: E402


def measure(source: Path, llm: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Instructions per call of the proxy from checkout ``source`` (runtime and CLI)."""
    port = free_port()
    capture = ["-m", "openenv_cli", "capture", "--upstream", f"{llm}/v1", "--port", str(port)]
    counted = _count([*capture, "--quiet"], port, source, llm, args, work, floor=False)
    return {"source": str(source), **counted}


def measure_floor(llm: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Instructions per call of ``raw_forwarder.py``: the floor, which parses nothing."""
    port = free_port()
    forwarder = [str(HERE / "raw_forwarder.py"), "--port", str(port)]
    forwarder += ["--upstream-port", llm.rsplit(":", 1)[1]]
    return _count(forwarder, port, ROOT, llm, args, work, floor=True)


def _count(
    argv: list[str],
    port: int,
    source: Path,
    llm: str,
    args: argparse.Namespace,
    work: Path,
    *,
    floor: bool,
) -> dict[str, Any]:
    """Run ``python argv`` under callgrind, counting only the measured phase's calls."""
    out_file = work / f"count-{port}.out"
    env = {**os.environ, "PYTHONPATH": f"{source / 'runtime'}{os.pathsep}{source}"}
    process = subprocess.Popen(
        [*valgrind(out_file), sys.executable, *argv],
        cwd=source,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        # the floor forwards /health to the stand-in: answered once the forwarder listens
        wait_until_healthy(url, 120, argv[0], alive=lambda: exited(process))
        asyncio.run(phase(url, args.sessions, 2, args.pace / 4, llm, floor))  # warm-up
        control("-i", "on", process.pid)
        asyncio.run(phase(url, args.sessions, args.calls, args.pace, llm, floor))
        control("-d", None, process.pid)
        control("-i", "off", process.pid)
    finally:
        process.terminate()
        process.wait(60)
    calls = args.sessions * args.calls
    return {"calls": calls, "instructions_per_call": round(instructions(out_file) / calls)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--calls", type=int, default=20, help="calls per session")
    parser.add_argument(
        "--pace", type=float, default=0.25, help="seconds between a session's calls"
    )
    parser.add_argument("--compare", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument(
        "--floor", action="store_true", help="also count raw_forwarder.py's (the floor)"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if not available():
        print(MISSING, file=sys.stderr)
        return 1
    sources = {"this checkout": ROOT}
    for item in args.compare:
        name, _, directory = item.partition("=")
        sources[name] = Path(directory).resolve()
    llm_port = free_port()
    llm = f"http://127.0.0.1:{llm_port}"
    policy = "benchmarks.training.rollouts_app:say_policy"
    stub = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "openenv_runtime.testing.stub_llm",
            "--port",
            str(llm_port),
            "--policy",
            policy,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'runtime'}{os.pathsep}{ROOT}"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    results: dict[str, Any] = {}
    try:
        wait_until_healthy(llm, 120, "stub model server", alive=lambda: exited(stub))
        with tempfile.TemporaryDirectory() as work:
            for name, source in sources.items():
                results[name] = measure(source, llm, args, Path(work))
                print(f"{name}: {results[name]['instructions_per_call']:,} instructions per call")
            if args.floor:
                results["floor"] = measure_floor(llm, args, Path(work))
                print(f"floor: {results['floor']['instructions_per_call']:,} instructions per call")
    finally:
        stub.terminate()
        stub.wait(30)
    doc = {
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "settings": {"sessions": args.sessions, "calls": args.calls, "pace_s": args.pace},
        "results": results,
    }
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"JSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
