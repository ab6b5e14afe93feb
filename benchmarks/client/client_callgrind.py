"""Instructions per step of the client, under callgrind: a measure other tenants cannot move.

    python benchmarks/client/client_callgrind.py
    python benchmarks/client/client_callgrind.py --compare before=/tmp/before/runtime
    python benchmarks/client/client_callgrind.py --keep benchmarks/results   # keep the callgrind files

``client_cost.py`` measures the client's CPU time per step, which moves with how busy the
machine is. The number of instructions the client process executes for the same steps does
not. One benchmark server (``openenv_cli.bench.bench_env:app``, as ``client_cost.py`` starts
it) runs natively; each client kind runs in its own process under
``valgrind --tool=callgrind --instr-atstart=no``: it opens ``--sessions`` sessions, warms
them up, switches instrumentation on (``callgrind_control -i on``), every session does
``--steps`` back-to-back steps, and the counters are dumped. Reported: user-space
instructions (Ir) of the client process per step for ``lean`` (``openenv bench``'s
connection, checking the reply's prefix), ``typed`` (the lean connection plus only the work
any typed client must do per step, the cheapest way pydantic offers: ``typed_floor.py``,
which ``client_cost.py`` measures too) and ``EnvClient`` (typed action in, typed ``StepResult`` out), and
their ratios. Kernel time (the socket calls) is not counted.

``--compare NAME=DIR`` measures the runtime in ``DIR`` too (put first on the client's
``PYTHONPATH``), e.g. an older revision's ``runtime`` from
``git archive HEAD runtime | tar -x -C /tmp/before``. The result goes to
``benchmarks/client/client_callgrind.json``. Needs ``valgrind``; takes a few minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks" / "client" / "client_callgrind.json"
KINDS = ("lean", "typed", "EnvClient")
OBSERVATION_PREFIX = '{"type":"observation"'


# -- the client process (runs under valgrind) ---------------------------------------------------
async def _client(kind: str, url: str, sessions: int, steps: int, warmup: int) -> None:
    sys.path.insert(0, str(ROOT))  # openenv_cli from this checkout, after the runtime under test
    from benchmarks.client.typed_floor import floor_reader, floor_step
    from benchmarks.server.callgrind import control
    from openenv_cli.bench.bench_env import BenchAction, BenchObservation
    from openenv_cli.bench.target import Target, step_frame
    from openenv_cli.bench.wsclient import LeanConnection
    from openenv_runtime import EnvClient, State
    from openenv_runtime.client import ws_url

    class BenchClient(EnvClient[BenchAction, BenchObservation, State]):
        pass

    action = BenchAction()
    if kind == "lean":
        conns = [await LeanConnection.open(ws_url(url), compression=False) for _ in range(sessions)]
        frame = step_frame(Target("127.0.0.1", 0, action=action.model_dump_json()), 0.0)

        async def one(i: int, n: int) -> None:
            conn = conns[i]
            for _ in range(n):
                reply = await conn.request(frame)
                if not (isinstance(reply, str) and reply.startswith(OBSERVATION_PREFIX)):
                    raise RuntimeError(f"unexpected reply {reply!r}")

        async def finish() -> None:
            await asyncio.gather(*(c.finish() for c in conns))
    elif kind == "typed":
        # The lean connection plus only the work any typed client must do per step
        # (typed_floor.py, the floor client_cost.py measures too).
        conns = [await LeanConnection.open(ws_url(url), compression=False) for _ in range(sessions)]
        read = floor_reader(BenchObservation)

        async def one(i: int, n: int) -> None:
            conn = conns[i]
            for _ in range(n):
                result = await floor_step(conn, action, read)
                if not result.observation.ok:
                    raise RuntimeError(f"unexpected result {result!r}")

        async def finish() -> None:
            await asyncio.gather(*(c.finish() for c in conns))

    else:
        clients = [BenchClient(url) for _ in range(sessions)]
        await asyncio.gather(*(c.connect() for c in clients))

        async def one(i: int, n: int) -> None:
            env = clients[i]
            for _ in range(n):
                result = await env.step(action)
                if not result.observation.ok:
                    raise RuntimeError(f"unexpected result {result!r}")

        async def finish() -> None:
            await asyncio.gather(*(c.close() for c in clients))

    await asyncio.gather(*(one(i, warmup) for i in range(sessions)))
    pid = os.getpid()
    await asyncio.to_thread(control, "-i", "on", pid)
    await asyncio.gather(*(one(i, steps) for i in range(sessions)))
    await asyncio.to_thread(control, "-d", None, pid)
    await asyncio.to_thread(control, "-i", "off", pid)
    await finish()


# -- the driver ----------------------------------------------------------------------------------
def measure(
    kind: str, runtime: Path, url: str, args: argparse.Namespace, label: str
) -> dict[str, Any]:
    from benchmarks.server.callgrind import instructions, valgrind

    with tempfile.TemporaryDirectory(prefix="openenv-client-callgrind-") as tmp:
        out_file = Path(tmp) / f"callgrind.{label}.{kind}.out"
        load = os.getloadavg()[0]
        argv = [
            *valgrind(out_file),
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            kind,
            url,
            f"--sessions={args.sessions}",
            f"--steps={args.steps}",
            f"--warmup={args.warmup}",
        ]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(runtime), str(ROOT)]),
            "PYTHONHASHSEED": "0",
        }
        started = time.monotonic()
        subprocess.run(argv, env=env, check=True, capture_output=True, timeout=1800)
        wall = time.monotonic() - started
        counted = instructions(out_file)
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            for path in Path(tmp).glob(out_file.name + "*"):
                shutil.copy(path, args.keep / path.name)
    steps = args.sessions * args.steps
    return {
        "instructions": counted,
        "steps": steps,
        "per_step": counted / steps,
        "wall_s": wall,
        "load_average": load,
    }


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        f"Client instructions per step ({doc['sessions']} sessions × {doc['steps']} steps, "
        f"after {doc['warmup']} warm-up steps each; user-space Ir of the client process)",
        "",
        "| runtime | lean | typed floor | EnvClient | floor ÷ lean | EnvClient ÷ lean |"
        " EnvClient ÷ floor |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, row in doc["rows"].items():
        lean, floor, client = (row[k]["per_step"] for k in KINDS)
        lines.append(
            f"| {label} | {lean:,.0f} | {floor:,.0f} | {client:,.0f} | {floor / lean:.2f}× "
            f"| {client / lean:.2f}× | {client / floor:.2f}× |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--child", nargs=2, metavar=("KIND", "URL"), help=argparse.SUPPRESS)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--steps", type=int, default=100, help="measured steps per session")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured steps per session")
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="also measure the runtime in DIR (the directory holding openenv_runtime)",
    )
    parser.add_argument("--keep", type=Path, help="copy the callgrind files here")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON result")
    args = parser.parse_args(argv)
    if args.child:
        kind, url = args.child
        asyncio.run(_client(kind, url, args.sessions, args.steps, args.warmup))
        return 0
    sys.path.insert(0, str(ROOT))
    from benchmarks.server.callgrind import MISSING, available
    from openenv_cli.bench.server import bench_server, running

    if not available():
        print(MISSING, file=sys.stderr)
        return 2

    runtimes = {
        **dict(item.split("=", 1) for item in args.compare),
        "current": str(ROOT / "runtime"),
    }
    doc: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "sessions": args.sessions,
        "steps": args.steps,
        "warmup": args.warmup,
        "load_average": os.getloadavg()[0],
        "rows": {},
    }
    with running(bench_server()) as server:
        for label, runtime in runtimes.items():
            doc["rows"][label] = {}
            for kind in KINDS:
                print(f"measuring {label} {kind} under callgrind", file=sys.stderr, flush=True)
                doc["rows"][label][kind] = measure(kind, Path(runtime), server.url, args, label)
            row = doc["rows"][label]
            row["EnvClient_vs_lean"] = row["EnvClient"]["per_step"] / row["lean"]["per_step"]
            row["typed_vs_lean"] = row["typed"]["per_step"] / row["lean"]["per_step"]
            row["EnvClient_vs_typed"] = row["EnvClient"]["per_step"] / row["typed"]["per_step"]
    text = markdown(doc)
    if not args.no_write:
        OUT.write_text(json.dumps(doc, indent=2) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
