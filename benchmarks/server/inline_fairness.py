"""Another client's step and the probes while one client floods pipelined steps, shortcut on and off.

    python benchmarks/server/inline_fairness.py                  # about a minute
    python benchmarks/server/inline_fairness.py --seconds 5 --label quick

The server is the environment ``openenv init`` writes (a plain ``def step``, answered in the
WebSocket protocol once proven cheap), served by ``python -m openenv_runtime.serve`` and pinned
to core 0: once as it is (``OPENENV_INLINE_FRAMES=1``) and once with the shortcut off
(``OPENENV_INLINE_FRAMES=0``), one after the other in the same run. For ``--seconds`` each:

* the flooder (its own process) holds one WebSocket, writes pipelined steps as fast as the
  server takes them and reads every reply;
* the prober (this process; flooder and prober pinned to core 1) steps another session every
  20 ms (latency p50/p99/max), and every 200 ms opens a new connection for ``GET /health`` and
  one for ``GET /ready``, as a kubelet's probes do: their latency, and how many took longer
  than the timeouts of the probes ``openenv deploy kubernetes`` renders (readiness 3 s,
  liveness 5 s).

Results: ``benchmarks/inline_fairness_<label>.{json,md}``.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import multiprocessing
import os
import socket
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT, ROOT / "benchmarks" / "server"):
    sys.path.insert(0, str(extra))  # first, even when an editable install lists it later

from hot_path import ECHO, generated_server  # noqa: E402
from websockets.frames import Frame, Opcode  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from openenv_cli.bench.server import ServerProcess, pin_tree  # noqa: E402
from openenv_cli.bench.stats import Summary  # noqa: E402

OUT = ROOT / "benchmarks" / "server"
STEP = json.dumps({"type": "step", "data": ECHO})
PROBE_TIMEOUTS = {"/ready": 3.0, "/health": 5.0}  # the rendered readinessProbe, livenessProbe
STEP_EVERY = 0.02
PROBE_EVERY = 0.2
WARM_UP = 40  # steps before the class's plain step() is proven cheap


def _handshake(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("closed during the handshake")
        head += chunk
    if not head.startswith(b"HTTP/1.1 101"):
        raise ConnectionError(head[:200].decode(errors="replace"))
    return sock


def flood(port: int, stop: Any, received: Any, cpus: list[int]) -> None:
    """The flooder's process: pipelined steps written as fast as the server reads them."""
    if cpus:
        os.sched_setaffinity(0, set(cpus))
    sock = _handshake(port)
    frame = Frame(Opcode.TEXT, STEP.encode()).serialize(mask=True, extensions=[])
    blob = frame * ((1 << 20) // len(frame))

    def write() -> None:
        try:
            while not stop.is_set():
                sock.sendall(blob)
        except OSError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        while not stop.is_set():
            data = sock.recv(1 << 20)
            if not data:
                break
            received.value += len(data)
    except OSError:
        pass
    finally:
        sock.close()


def timed_get(port: int, path: str) -> float | None:
    """Seconds for a ``GET`` on a new connection; ``None`` when it failed (not 200, or 30 s)."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return time.perf_counter() - started if response.status == 200 else None
    except OSError:
        return None
    finally:
        conn.close()


def measure(server: ServerProcess, seconds: float, cpus: list[int]) -> dict[str, Any]:
    """The prober's figures while the flooder runs against ``server``."""
    port = server.port
    context = multiprocessing.get_context("spawn")
    stop, received = context.Event(), context.Value("q", 0)
    with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=60) as ws:
        ws.send('{"type": "reset"}')
        ws.recv(timeout=60)
        for _ in range(WARM_UP):
            ws.send(STEP)
            ws.recv(timeout=60)
        flooder = context.Process(target=flood, args=(port, stop, received, cpus), daemon=True)
        flooder.start()
        try:
            deadline = time.monotonic() + 60
            while received.value == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            steps: list[float] = []
            probes: dict[str, list[float]] = {path: [] for path in PROBE_TIMEOUTS}
            failed: dict[str, int] = dict.fromkeys(PROBE_TIMEOUTS, 0)
            started = time.monotonic()
            bytes_before = received.value
            next_probe = started
            while time.monotonic() - started < seconds:
                t0 = time.perf_counter()
                ws.send(STEP)
                ws.recv(timeout=60)
                steps.append(time.perf_counter() - t0)
                if time.monotonic() >= next_probe:
                    next_probe += PROBE_EVERY
                    for path in PROBE_TIMEOUTS:
                        took = timed_get(port, path)
                        if took is None:
                            failed[path] += 1
                        else:
                            probes[path].append(took)
                time.sleep(STEP_EVERY)
            elapsed = time.monotonic() - started
            flood_bytes = received.value - bytes_before
        finally:
            stop.set()
            flooder.join(30)
            if flooder.is_alive():
                flooder.kill()
    row: dict[str, Any] = {
        "other_step_ms": _summary(steps),
        "flood_reply_mb_per_s": flood_bytes / elapsed / 1e6,
    }
    for path, timeout in PROBE_TIMEOUTS.items():
        row[path] = {
            **_summary(probes[path]),
            "failed": failed[path],
            f"over_{timeout:g}s": sum(1 for t in probes[path] if t > timeout),
        }
    return row


def _summary(values: list[float]) -> dict[str, Any]:
    s = Summary.of_seconds(values)
    return {"n": s.n, "p50": s.p50, "p99": s.p99, "max": s.max}


def run(seconds: float) -> dict[str, Any]:
    pinned = (os.cpu_count() or 1) >= 2
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="openenv-fairness-") as tmp:
        for mode, value in (("on", "1"), ("off", "0")):
            server = generated_server(Path(tmp))
            server.env = {**(server.env or {}), "OPENENV_INLINE_FRAMES": value}
            print(f"shortcut {mode}: starting", file=sys.stderr, flush=True)
            server.start()
            try:
                server.wait_healthy(180)
                pin_tree(server.pids, [0] if pinned else [])
                if pinned:
                    os.sched_setaffinity(0, {1})
                rows[mode] = measure(server, seconds, [1] if pinned else [])
            finally:
                server.stop()
    return {"pinned": pinned, "rows": rows}


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        "# Inline frames under a flood: another client's step and the probes, shortcut on vs off",
        "",
        f"Measured {doc['started_at']} with `python benchmarks/server/inline_fairness.py --seconds "
        f"{doc['seconds']:g}`: one client pipelines steps of the generated environment and reads "
        "its replies; another session steps every 20 ms; `/health` and `/ready` are fetched on "
        "new connections every 200 ms. "
        + (
            "Server pinned to core 0, flooder and prober to core 1. "
            if doc["pinned"]
            else "Nothing pinned (one core). "
        )
        + f"Load average before the run: {doc['load_before']}; after: {doc['load_after']} "
        "(other tenants of the machine ran meanwhile).",
        "",
        "| shortcut | other step p50 ms | p99 | max | /health p50 | p99 | max | > 5 s | "
        "/ready p50 | p99 | max | > 3 s | failed | flood replies MB/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, row in doc["rows"].items():
        step, health, ready = row["other_step_ms"], row["/health"], row["/ready"]
        lines.append(
            f"| {mode} | {_ms(step['p50'])} | {_ms(step['p99'])} | {_ms(step['max'])} | "
            f"{_ms(health['p50'])} | {_ms(health['p99'])} | {_ms(health['max'])} | "
            f"{health['over_5s']} | {_ms(ready['p50'])} | {_ms(ready['p99'])} | "
            f"{_ms(ready['max'])} | {ready['over_3s']} | {health['failed'] + ready['failed']} | "
            f"{row['flood_reply_mb_per_s']:.1f} |"
        )
    on, off = doc["rows"].get("on"), doc["rows"].get("off")
    if on and off:
        ratios = []
        for label, a, b in (
            ("other step p99", on["other_step_ms"]["p99"], off["other_step_ms"]["p99"]),
            ("/health p99", on["/health"]["p99"], off["/health"]["p99"]),
            ("/health max", on["/health"]["max"], off["/health"]["max"]),
            ("/ready p99", on["/ready"]["p99"], off["/ready"]["p99"]),
        ):
            if a is not None and b:
                ratios.append(f"{label} {a / b:.2f}×")
        lines += ["", "On ÷ off: " + ", ".join(ratios) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="flood per mode")
    parser.add_argument("--label", default="latest", help="inline_fairness_<label>.{json,md}")
    args = parser.parse_args(argv)
    stamp = datetime.now(UTC)
    doc: dict[str, Any] = {
        "started_at": stamp.isoformat(timespec="seconds"),
        "seconds": args.seconds,
        "cpus": os.cpu_count(),
        "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    doc.update(run(args.seconds))
    doc["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    text = markdown(doc)
    (OUT / f"inline_fairness_{args.label}.json").write_text(json.dumps(doc, indent=2) + "\n")
    (OUT / f"inline_fairness_{args.label}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
