"""Instructions per step of the server, under callgrind: a measure other tenants cannot move.

    python benchmarks/server/hot_path_callgrind.py                       # floor, floor-inline, generated, bench
    python benchmarks/server/hot_path_callgrind.py --servers floor,generated --sessions 16 --steps 100
    python benchmarks/server/hot_path_callgrind.py --keep benchmarks/results   # keep the callgrind files

CPU time per step (``hot_path.py``) moves with how busy the machine is: the floor read 24 µs in
one run and 31 µs in another. The number of instructions the server executes for the same
steps does not. Each server (the same as ``hot_path.py``'s: ``floor``, ``floor-inline``, ``generated``, ``bench``)
is started under ``valgrind --tool=callgrind`` with instrumentation off; ``--sessions``
WebSocket sessions are opened, reset and warmed up (so that a plain ``step()`` has settled on
its placement), then instrumentation is switched on (``callgrind_control -i on``), every
session does ``--steps`` back-to-back steps, and the counters are dumped. Reported: user-space
instructions (Ir) of the server process per step, and the ratio to the floor. Kernel time (the
socket calls) is not counted, so the ratio reads higher than ``hot_path.py``'s CPU-time ratio,
whose floor is mostly system calls; it is the measure to compare two revisions by.

``--keep DIR`` keeps each ``callgrind.out`` (open with ``callgrind_annotate`` or KCachegrind to
see where the instructions go). Needs ``valgrind``; takes about a minute per server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT, ROOT / "benchmarks" / "server"):
    sys.path.insert(0, str(extra))  # first, even when an editable install lists it later

from compare_measure import make_server  # noqa: E402
from hot_path import ECHO, generated_server  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from benchmarks.server.callgrind import MISSING, available, control, instructions, valgrind  # noqa: E402
from openenv_cli.bench.server import ServerProcess  # noqa: E402

SERVERS = ("floor", "floor-inline", "generated", "generated-nometrics", "bench")
OUT = ROOT / "benchmarks" / "server"


def _server(name: str, workdir: Path, out_file: Path) -> ServerProcess:
    server = (
        generated_server(workdir, metrics=name == "generated")
        if name in ("generated", "generated-nometrics")
        else make_server("ours" if name == "bench" else name, 1)
    )
    argv = server.argv
    if argv[1:3] == ["-m", "openenv_runtime.serve"]:  # the placement's limits, scaled
        argv = [argv[0], str(OUT / "callgrind_serve.py"), *argv[3:]]
    server.argv = [*valgrind(out_file), *argv]
    server.env = {**(server.env or {}), "PYTHONHASHSEED": "0"}
    return server


def _frame(name: str) -> str:
    action = ECHO if name.startswith("generated") else {"wait": 0.0}
    return json.dumps({"type": "step", "data": action}, separators=(",", ":"))


async def _drive(url: str, frame: str, sessions: int, steps: int, warmup: int, pid: int) -> None:
    sockets = [await connect(url, compression=None, max_size=None) for _ in range(sessions)]
    try:
        for ws in sockets:
            await ws.send('{"type":"reset","data":{}}')
            await ws.recv()
        for ws in sockets:  # one class's placement settles on its first steps
            for _ in range(warmup):
                await ws.send(frame)
                await ws.recv()
        await asyncio.to_thread(control, "-i", "on", pid)

        async def run(ws: Any) -> None:
            for _ in range(steps):
                await ws.send(frame)
                reply = await ws.recv()
                if '"type":"observation"' not in str(reply):
                    raise RuntimeError(f"unexpected reply: {reply!r}")

        await asyncio.gather(*(run(ws) for ws in sockets))
        await asyncio.to_thread(control, "-d", None, pid)
        await asyncio.to_thread(control, "-i", "off", pid)
    finally:
        for ws in sockets:
            await ws.close()


def measure(name: str, sessions: int, steps: int, warmup: int, keep: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="openenv-callgrind-") as tmp:
        out_file = Path(tmp) / f"callgrind.{name}.out"
        server = _server(name, Path(tmp), out_file)
        server.start()
        try:
            server.wait_healthy(300)
            url = server.url.replace("http://", "ws://") + "/ws"
            started = time.monotonic()
            asyncio.run(_drive(url, _frame(name), sessions, steps, warmup, server.pids[0]))
            wall = time.monotonic() - started
        finally:
            server.stop()
        counted = instructions(out_file)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            for path in Path(tmp).glob(out_file.name + ".*"):
                shutil.copy(path, keep / path.name)
    return {
        "instructions": counted,
        "steps": sessions * steps,
        "per_step": counted / (sessions * steps),
        "wall_s": wall,
    }


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        "# Hot path: server instructions per step (callgrind)",
        "",
        f"Measured {doc['started_at']} with `python benchmarks/server/hot_path_callgrind.py` "
        f"({doc['sessions']} sessions × {doc['steps']} steps over WebSocket, after "
        f"{doc['warmup']} warm-up steps each). User-space instructions of the server process; "
        "independent of the machine's load.",
        "",
        "| server | instructions per step | ÷ floor |",
        "|---|---:|---:|",
    ]
    floor = doc["rows"].get("floor", {}).get("per_step")
    for name, row in doc["rows"].items():
        ratio = f"{row['per_step'] / floor:.2f}×" if floor else "–"
        lines.append(f"| {name} | {row['per_step']:,.0f} | {ratio} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default=",".join(SERVERS))
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--steps", type=int, default=200, help="measured steps per session")
    parser.add_argument("--warmup", type=int, default=40, help="unmeasured steps per session")
    parser.add_argument("--keep", type=Path, help="copy the callgrind files here")
    parser.add_argument("--label", help="also write hot_path_callgrind_<label>.{json,md}")
    args = parser.parse_args(argv)
    if not available():
        print(MISSING, file=sys.stderr)
        return 2
    doc: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "sessions": args.sessions,
        "steps": args.steps,
        "warmup": args.warmup,
        "rows": {},
    }
    for name in (n for n in args.servers.split(",") if n):
        print(f"measuring {name} under callgrind", file=sys.stderr, flush=True)
        doc["rows"][name] = measure(name, args.sessions, args.steps, args.warmup, args.keep)
    text = markdown(doc)
    if args.label:
        (OUT / f"hot_path_callgrind_{args.label}.json").write_text(json.dumps(doc, indent=2) + "\n")
        (OUT / f"hot_path_callgrind_{args.label}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
