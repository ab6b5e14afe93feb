"""A py-spy flame graph of the server while a generated environment is stepped over WebSocket.

    pip install py-spy
    python benchmarks/server/flame_step.py --out benchmarks/server/flame-step-latest.svg   # as root (ptrace)

Starts the project ``openenv init`` writes (as ``hot_path.py`` does), pins it to core 0,
drives 64 sessions of back-to-back steps from core 1, and records the server's process with
``py-spy record`` (``--gil``: only the thread running Python, so idle pool threads do not drown it) for ``--seconds``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT, ROOT / "benchmarks" / "server"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from hot_path import generated_server, target  # noqa: E402

from openenv_cli.bench.loadgen import LoadGenerator  # noqa: E402
from openenv_cli.bench.server import pin_tree  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the SVG to write")
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument(
        "--runtime-dir", help="import openenv_runtime from here (e.g. an older revision's runtime/)"
    )
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    pinned = (os.cpu_count() or 1) >= 2
    with tempfile.TemporaryDirectory(prefix="openenv-flame-") as tmp:
        server = generated_server(Path(tmp))
        if args.runtime_dir and server.env is not None:
            server.env["PYTHONPATH"] = os.pathsep.join((args.runtime_dir, tmp))
        server.start()
        try:
            server.wait_healthy(120)
            pin_tree(server.pids, [0] if pinned else [])
            tgt = target("generated", server, "ws")
            with LoadGenerator(1, [1] if pinned else None) as lg:
                lg.throughput(tgt, 64, 20, 0.0, 60)  # warm-up: the step placement settles
                stop = threading.Event()

                def drive() -> None:
                    while not stop.is_set():
                        lg.throughput(tgt, 64, 300, 0.0, 120)

                driver = threading.Thread(target=drive, daemon=True)
                driver.start()
                subprocess.run(
                    [
                        spy,
                        "record",
                        "--pid",
                        str(server.pids[0]),
                        "--duration",
                        str(args.seconds),
                        "--rate",
                        str(args.rate),
                        "--output",
                        str(args.out),
                        "--format",
                        "flamegraph",
                        "--gil",  # only the thread holding the GIL: idle pool threads hide the rest
                    ],
                    check=True,
                )
                stop.set()
                driver.join(180)
        finally:
            server.stop()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
