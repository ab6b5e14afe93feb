"""Every hostile input we know of, against one real server; a table and JSON of how it held.

    python benchmarks/server/abuse.py                       # this checkout's runtime
    python benchmarks/server/abuse.py --runtime /tmp/old/runtime --label before   # another runtime

One server (``python -m openenv_runtime.serve abuse_app:app``, one worker, auth on, step
timeout 1 s, 8 sessions per client, 4 pool threads — all set through environment variables so
an older runtime gets the same) takes every case in turn. For each case the table says whether
it was answered with the clear error expected of it. At the end: sessions still open after
every client closed (leaked), whether the server process was ever replaced (restarts), and
its peak RSS (VmHWM), plus the peak RSS growth caused by one 60 MiB WebSocket frame (under uvicorn's old 64 MiB ceiling).
Results go to ``benchmarks/results/abuse-<label>.json``. Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

sys.path.insert(0, str(Path(__file__).resolve().parent))
import abuse_more as more

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
KEY = "abuse-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
SETTINGS = {
    "OPENENV_API_KEY": KEY,
    "STEP_TIMEOUT": "1",
    "MAX_SESSIONS_PER_CLIENT": "8",
    "OPENENV_SYNC_POOL_SIZE": "4",
    "MAX_CONCURRENT_ENVS": "64",
    "LOG_LEVEL": "warning",
    "UNUSED_SESSION_TIMEOUT": "2",  # sessions reset but never stepped (unknown to older runtimes)
}
MIB = 1 << 20


@dataclass
class Outcome:
    case: str
    expected: str
    got: str
    clear: bool
    seconds: float


@dataclass
class Server:
    url: str
    port: int
    process: subprocess.Popen[bytes]

    def ws(self, path: str = "/ws", headers: dict[str, str] | None = None) -> ClientConnection:
        return connect(
            f"ws://127.0.0.1:{self.port}{path}",
            additional_headers=AUTH if headers is None else headers,
            open_timeout=10,
            max_size=None,
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        **kw: Any,
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers={**AUTH, **(headers or {})}, **kw)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def health(self) -> dict[str, Any]:
        return dict(json.loads(self.request("GET", "/health")[1]))

    def proc(self, field: str) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        return 0


def ws_reply(conn: ClientConnection, frame: str | bytes, timeout: float = 10) -> str:
    """The error code (or close code) the server answered ``frame`` with."""
    try:
        conn.send(frame)
        reply = json.loads(conn.recv(timeout=timeout))
        return (
            str(reply["data"].get("code", reply["type"]))
            if reply["type"] == "error"
            else reply["type"]
        )
    except ConnectionClosed as exc:
        return f"close {exc.rcvd.code if exc.rcvd else 'none'}"
    except TimeoutError:
        return "no answer"


def in_session(server: Server, frame: str | bytes, timeout: float = 10) -> str:
    with server.ws() as conn:
        conn.send('{"type":"reset"}')
        conn.recv(timeout=10)
        return ws_reply(conn, frame, timeout)


def frame_64mib(server: Server) -> str:
    got = in_session(
        server, json.dumps({"type": "step", "data": {"message": "x" * (60 * MIB)}}), 60
    )
    # The server sends 1009 and closes as soon as the frame header announces the size; a
    # client still writing the rest may see the reset before it reads the close frame.
    return "close 1009" if got == "close none" else got


def http_declared(server: Server) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest("POST", "/step")
    for k, v in {
        **AUTH,
        "content-type": "application/json",
        "content-length": str(64 * MIB),
    }.items():
        conn.putheader(k, v)
    conn.endheaders()
    try:
        conn.send(b'{"action": {"message": "' + b"x" * MIB)  # a first MiB, then the answer
    except OSError:
        pass  # refused before the body: the answer is waiting
    try:
        return str(conn.getresponse().status)
    except (ConnectionError, http.client.HTTPException) as exc:
        return type(exc).__name__
    finally:
        conn.close()


def http_chunked(server: Server) -> str:
    chunks = (b"x" * MIB for _ in range(64))
    try:
        status, _ = server.request("POST", "/reset", body=chunks, encode_chunked=True)
        return str(status)
    except (ConnectionError, http.client.HTTPException) as exc:
        return type(exc).__name__


def many_fields(server: Server) -> str:
    data = {"message": "x", **{f"f{i}": 0 for i in range(80_000)}}
    with server.ws() as conn:
        conn.send('{"type":"reset"}')
        conn.recv(timeout=10)
        conn.send(json.dumps({"type": "step", "data": data}))
        raw = conn.recv(timeout=30)
        code = json.loads(raw)["data"].get("code")
        return f"{code} ({len(raw)} bytes)"


def hung_steps(server: Server) -> str:
    def one(_: int) -> str:
        return in_session(
            server, json.dumps({"type": "step", "data": {"message": "hang", "wait": 8}}), 6
        )

    with ThreadPoolExecutor(6) as pool:  # more than the 4 pool threads
        codes = set(pool.map(one, range(6)))
    started = time.monotonic()
    after = in_session(server, json.dumps({"type": "step", "data": {"message": "ok"}}), 5)
    return f"{'/'.join(sorted(codes))}; then a step: {after} in {time.monotonic() - started:.1f}s"


def ws_flood(server: Server) -> str:
    refused = 0
    with ExitStack() as stack:
        for _ in range(20):
            conn = stack.enter_context(server.ws())
            refused += ws_reply(conn, '{"type":"reset"}', 5) != "observation"
    return f"{refused} of 20 refused"


def http_flood(server: Server) -> str:
    opened, refused = [], 0
    for _ in range(20):
        status, body = server.request(
            "POST", "/reset", body=b"{}", headers={"content-type": "application/json"}
        )
        if status == 200:
            opened.append(json.loads(body)["session_id"])
        else:
            refused += 1
    for session in opened:
        server.request(
            "POST",
            "/close",
            body=json.dumps({"session_id": session}),
            headers={"content-type": "application/json"},
        )
    return f"{refused} of 20 refused"


def refused_ws(server: Server, path: str, headers: dict[str, str]) -> str:
    try:
        with server.ws(path, headers):
            return "accepted"
    except InvalidStatus as exc:
        return str(exc.response.status_code)


def slow_headers(server: Server) -> str:
    socks = []
    try:
        for _ in range(50):
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(b"GET /health HTTP/1.1\r\nHo")
            socks.append(sock)
        started = time.monotonic()
        status = server.request("GET", "/health")[0]
        return f"health {status} in {time.monotonic() - started:.2f}s with 50 stalled clients"
    finally:
        for sock in socks:
            sock.close()


def cases(server: Server, runtime: Path) -> list[tuple[str, str, Callable[[], str]]]:
    step = lambda message: json.dumps({"type": "step", "data": {"message": message}})  # noqa: E731
    return [
        ("60 MiB WebSocket frame", "close 1009", lambda: frame_64mib(server)),
        ("64 MiB HTTP body, declared", "413", lambda: http_declared(server)),
        ("64 MiB HTTP body, chunked", "413", lambda: http_chunked(server)),
        ("action with 80,000 unknown fields", "VALIDATION_ERROR (<2 KB)", lambda: many_fields(server)),
        ("invalid JSON", "INVALID_JSON", lambda: in_session(server, "{not json")),
        ("binary garbage", "INVALID_JSON", lambda: in_session(server, b"\xff\xfe\x00")),
        ("JSON nested 100,000 deep", "INVALID_JSON", lambda: in_session(server, "[" * 100_000)),
        ("frame that is not an object", "VALIDATION_ERROR", lambda: in_session(server, "[1,2]")),
        ("unknown message type", "UNKNOWN_TYPE", lambda: in_session(server, '{"type":"dance"}')),
        ("environment raises", "EXECUTION_ERROR", lambda: in_session(server, step("boom"))),
        ("6 hung sync steps, 4 pool threads", "STEP_TIMEOUT; then a step: observation", lambda: hung_steps(server)),
        ("20 WebSocket sessions from one client", "12 of 20 refused", lambda: ws_flood(server)),
        ("20 HTTP sessions from one client", "12 of 20 refused", lambda: http_flood(server)),
        ("HTTP without a token", "401", lambda: str(server.request("GET", "/schema", headers={"Authorization": ""})[0])),
        ("WebSocket without a token", "403", lambda: refused_ws(server, "/ws", {})),
        ("token in the URL", "403", lambda: refused_ws(server, f"/ws?access_token={KEY}", {})),
        ("user path /healthz-evil without a token", "401", lambda: str(server.request("GET", "/healthz-evil", headers={"Authorization": ""})[0])),
        ("50 clients sending headers byte by byte", "health 200", lambda: slow_headers(server)),
        ("tools/list naming another client's session", "refused; victim steps: True", lambda: more.hijack_tool_call(server)),
        ("session/close of another client's session", "refused; victim steps: True", lambda: more.hijack_close(server)),
        ("1,000 idle sockets from one address", "health 200; 5 of 5 episodes", lambda: more.idle_sockets(server)),
        ("40 session-less MCP / Task API calls", "peak <= 8 instances for one client", lambda: more.outside_capacity(server)),
        ("MCP envelope with 80,000 unknown keys", "< 4096 bytes", lambda: more.amplified_error(server)),
        ("environment constructor that hangs", "FACTORY_ERROR", lambda: more.hung_create(server)),
        ("state() that hangs", "STEP_TIMEOUT", lambda: more.hung_state(server)),
        ("8 HTTP sessions reset, never stepped", "0 of 8 still held", lambda: more.unused_http_sessions(server)),
        ("openenv.yaml alias bomb", "refused", lambda: more.yaml_bomb(runtime)),
    ]  # fmt: skip


def start(runtime: Path, port: int) -> Server:
    env = {
        k: v for k, v in os.environ.items() if k not in ("OPENENV_SERVER_FLAGS", "OPENENV_MANIFEST")
    }
    env.update(
        SETTINGS,
        PORT=str(port),
        PYTHONPATH=os.pathsep.join([str(runtime), str(ROOT / "benchmarks" / "server")]),
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "openenv_runtime.serve", "abuse_app:app", "--app-dir", str(ROOT / "benchmarks" / "server")],
        cwd=ROOT / "benchmarks" / "server",
        env=env,
    )  # fmt: skip
    server = Server(f"http://127.0.0.1:{port}", port, process)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            server.health()
            return server
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("the server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runtime", type=Path, default=ROOT / "runtime", help="folder holding openenv_runtime"
    )
    parser.add_argument("--label", default="after")
    args = parser.parse_args()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = start(args.runtime, port)
    pid = server.health()["pid"]
    outcomes: list[Outcome] = []
    frame_peak = 0
    try:
        for name, expected, run in cases(server, args.runtime):
            before = server.proc("VmHWM")
            started = time.monotonic()
            try:
                got = run()
            except Exception as exc:  # a case that breaks the client is reported, not fatal
                got = f"{type(exc).__name__}: {str(exc)[:60]}"
            if name.startswith("60 MiB WebSocket"):
                frame_peak = server.proc("VmHWM") - before
            clear = got == expected or got.startswith(expected + " ")
            if name.startswith("action with"):
                clear = (
                    got.startswith("VALIDATION_ERROR") and int(got.split("(")[1].split()[0]) < 2048
                )
            if name.startswith("50 clients"):
                clear = got.startswith("health 200")
            if name.startswith("40 session-less"):
                clear = int(got.split()[1]) <= 8
            if name.startswith("MCP envelope"):
                clear = int(got.split()[0]) < 4096
            if name.startswith("8 HTTP sessions"):
                clear = got.startswith("0 of") and not got.endswith("of 0 still held")
            if name.startswith(("environment constructor", "openenv.yaml")):
                clear = got.startswith(expected)
            outcomes.append(
                Outcome(name, expected, got, clear, round(time.monotonic() - started, 2))
            )
        deadline = time.monotonic() + 15
        while server.health()["active_sessions"] and time.monotonic() < deadline:
            time.sleep(0.2)
        health = server.health()
        leaked = int(health["active_sessions"])
        restarts = int(health["pid"] != pid or server.process.poll() is not None)
        peak = server.proc("VmHWM")
    finally:
        server.process.terminate()
        try:
            server.process.wait(20)
        except subprocess.TimeoutExpired:
            server.process.kill()
    width = max(len(o.case) for o in outcomes)
    print(f"\n{'case':<{width}}  {'clear':<5}  answer")
    for o in outcomes:
        print(f"{o.case:<{width}}  {'yes' if o.clear else 'NO':<5}  {o.got}")
    summary = {
        "label": args.label,
        "cases_tried": len(outcomes),
        "answered_with_a_clear_error": sum(o.clear for o in outcomes),
        "sessions_leaked": leaked,
        "server_restarts": restarts,
        "peak_rss_mib": round(peak / MIB, 1),
        "peak_rss_growth_from_one_60_mib_frame_mib": round(frame_peak / MIB, 1),
        "note": "one worker; the machine's 2 cores were shared with other work",
    }
    print()
    for key, value in summary.items():
        print(f"{key:<45} {value}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"abuse-{args.label}.json"
    out.write_text(json.dumps({**summary, "cases": [asdict(o) for o in outcomes]}, indent=2) + "\n")
    print(f"\nwritten to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
