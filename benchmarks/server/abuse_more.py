"""The second round of ``abuse.py`` cases: session hijack, floods, work outside capacity,
amplified JSON-RPC errors, hung work, held HTTP sessions, a YAML bomb.

Each function takes the running server (``abuse.Server``) and returns the answer the table
shows; ``abuse.py`` compares it with the expected one.
"""

from __future__ import annotations

import http.client
import json
import resource
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

OTHER = "127.0.0.2"  # a second client address on the loopback interface
KEY = "abuse-victim-session-key"


def _rpc(method: str, **params: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


def _post(server: Any, path: str, body: bytes) -> dict[str, Any]:
    status, raw = server.request(
        "POST", path, body=body, headers={"content-type": "application/json"}
    )
    return dict(json.loads(raw)) if raw.startswith(b"{") else {"status": status}


def _victim(server: Any) -> Any:
    conn = server.ws(headers={**server_auth(), "X-OpenEnv-Session": KEY})
    conn.send('{"type":"reset"}')
    conn.recv(timeout=10)
    return conn


def server_auth() -> dict[str, str]:
    from abuse import AUTH

    return dict(AUTH)


def _still_steps(conn: Any) -> bool:
    try:
        conn.send('{"type":"step","data":{"message":"mine"}}')
        return bool(json.loads(conn.recv(timeout=5))["type"] == "observation")
    except (ConnectionClosed, TimeoutError):
        return False


def hijack_tool_call(server: Any) -> str:
    with _victim(server) as mine:
        reply = _post(server, "/mcp", _rpc("tools/list", session_id=KEY))
        message = str(reply.get("error", {}).get("message", "reached the session"))
        return f"{'refused' if 'Unknown session_id' in message else 'REACHED: ' + message[:40]}; victim steps: {_still_steps(mine)}"


def hijack_close(server: Any) -> str:
    with _victim(server) as mine, server.ws() as attacker:
        attacker.send('{"type":"reset"}')
        attacker.recv(timeout=10)
        frame = {"type": "mcp", "data": json.loads(_rpc("openenv/session/close", session_id=KEY))}
        attacker.send(json.dumps(frame))
        reply = json.loads(attacker.recv(timeout=10))["data"]
        refused = "error" in reply
        return f"{'refused' if refused else 'CLOSED'}; victim steps: {_still_steps(mine)}"


def _episode(port: int) -> bool:
    sock = socket.create_connection(("127.0.0.1", port), source_address=(OTHER, 0), timeout=10)
    try:
        with connect(
            f"ws://127.0.0.1:{port}/ws",
            sock=sock,
            additional_headers=server_auth(),
            open_timeout=10,
        ) as conn:
            conn.send('{"type":"reset"}')
            conn.recv(timeout=10)
            conn.send('{"type":"step","data":{"message":"hi"}}')
            ok = json.loads(conn.recv(timeout=10))["type"] == "observation"
            conn.send('{"type":"close"}')
            return bool(ok)
    except (OSError, ConnectionClosed, TimeoutError):
        return False


def _health_from_other(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(OTHER, 0))
    try:
        conn.request("GET", "/health")
        return str(conn.getresponse().status)
    except (OSError, http.client.HTTPException) as exc:
        return type(exc).__name__
    finally:
        conn.close()


def idle_sockets(server: Any, count: int = 1000) -> str:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, count + 256), hard), hard))
    with ExitStack() as stack:
        opened = 0
        for _ in range(count):
            try:
                stack.enter_context(socket.create_connection(("127.0.0.1", server.port), timeout=5))
                opened += 1
            except OSError:
                break
        time.sleep(0.5)
        health = _health_from_other(server.port)
        episodes = sum(_episode(server.port) for _ in range(5))
    return f"health {health}; {episodes} of 5 episodes ({opened} idle sockets)"


def outside_capacity(server: Any) -> str:
    server.request("POST", "/abuse/reset-peak")
    before = json.loads(server.request("GET", "/abuse/instances")[1])["live"]

    def mcp(_: int) -> None:
        _post(server, "/mcp", _rpc("tools/list"))

    def task(_: int) -> None:
        server.request("GET", "/abuse/splits")

    with ThreadPoolExecutor(40) as pool:
        list(pool.map(mcp, range(20)))
        list(pool.map(task, range(20)))
    peak = json.loads(server.request("GET", "/abuse/instances")[1])["peak"] - before
    return f"peak {peak} instances for one client (cap 8)"


def amplified_error(server: Any) -> str:
    envelope = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        **{f"k{i}": 0 for i in range(80_000)},
    }
    _status, raw = server.request(
        "POST",
        "/mcp",
        body=json.dumps(envelope).encode(),
        headers={"content-type": "application/json"},
    )
    return f"{len(raw)} bytes"


def hung_create(server: Any) -> str:
    server.request("POST", "/abuse/hang-create")
    try:
        started = time.monotonic()
        with server.ws() as conn:
            try:
                reply = json.loads(conn.recv(timeout=5))
                got = str(reply["data"].get("code", reply["type"]))
            except TimeoutError:
                got = "no answer"
            except ConnectionClosed as exc:
                got = f"close {exc.rcvd.code if exc.rcvd else 'none'}"
        return f"{got} in {time.monotonic() - started:.1f}s"
    finally:
        server.request("DELETE", "/abuse/hang-create")
        time.sleep(8.5)  # the hung constructors return


def hung_state(server: Any) -> str:
    with server.ws() as conn:
        conn.send('{"type":"reset"}')
        conn.recv(timeout=10)
        conn.send('{"type":"step","data":{"message":"stall-state"}}')
        conn.recv(timeout=10)
        conn.send('{"type":"state"}')
        try:
            reply = json.loads(conn.recv(timeout=5))
            return str(reply["data"].get("code", reply["type"]))
        except TimeoutError:
            return "no answer"
        except ConnectionClosed as exc:
            return f"close {exc.rcvd.code if exc.rcvd else 'none'}"


def unused_http_sessions(server: Any) -> str:
    opened = []
    for _ in range(8):  # as many as the per-client cap leaves room for
        status, body = server.request(
            "POST", "/reset", body=b"{}", headers={"content-type": "application/json"}
        )
        if status == 200:
            opened.append(json.loads(body)["session_id"])
    time.sleep(4)  # UNUSED_SESSION_TIMEOUT is 2 s here; SESSION_TIMEOUT the default 600 s
    held = sum(server.request("GET", f"/state?session_id={s}")[0] == 200 for s in opened)
    for session in opened:
        server.request(
            "POST",
            "/close",
            body=json.dumps({"session_id": session}).encode(),
            headers={"content-type": "application/json"},
        )
    return f"{held} of {len(opened)} still held"


def yaml_bomb(runtime: Path) -> str:
    levels = "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    text = "a: &a [x, x, x, x, x, x, x, x, x]\n" + levels + "server: {max_concurrent_envs: *i}\n"
    with tempfile.TemporaryDirectory() as folder:
        manifest = Path(folder) / "openenv.yaml"
        manifest.write_text(text)
        code = (
            "from openenv_runtime.server.config.settings import load_settings\n"
            f"load_settings(environ={{}}, manifest={str(manifest)!r})"
        )
        started = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, "-c", code],
                env={"PYTHONPATH": str(runtime)},
                capture_output=True,
                timeout=20,
            )
        except subprocess.TimeoutExpired:
            return "hung (killed after 20s)"
        took = time.monotonic() - started
        refused = b"EnvironmentContractError" in done.stderr and b"alias" in done.stderr
        return f"{'refused' if refused else 'exit ' + str(done.returncode)} in {took:.1f}s"
