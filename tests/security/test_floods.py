"""No client starves the others: idle sockets, work outside capacity, amplified replies."""

from __future__ import annotations

import http.client
import json
import select
import socket
import time
from contextlib import ExitStack
from typing import Any

import pytest
from websockets.sync.client import connect

from openenv_runtime import create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import free_port, running_server
from tests.fixtures.echo import EchoAction, EchoObservation
from tests.fixtures.mcp_echo import ToolEchoEnvironment
from tests.fixtures.tracking import Tracker, tracking_env
from tests.support.servers import get_json, post_json, spawn_server, stop_process, wait_until

pytestmark = pytest.mark.integration  # real servers on real sockets

OTHER = "127.0.0.2"  # a second client address on the loopback interface


def status(url: str, path: str, source: str | None = None) -> int:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(
        host, int(port), timeout=10, source_address=(source, 0) if source else None
    )
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def episode(url: str) -> list[str]:
    """A normal client's episode over /ws; the reply types."""
    port = int(url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), source_address=(OTHER, 0))
    with connect(url.replace("http", "ws") + "/ws", sock=sock, open_timeout=10) as conn:
        types = []
        for frame in ({"type": "reset"}, {"type": "step", "data": {"message": "hi"}}):
            conn.send(json.dumps(frame))
            types.append(json.loads(conn.recv(timeout=10))["type"])
        conn.send(json.dumps({"type": "close"}))
    return types


def test_idle_sockets_from_one_address_starve_no_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_CONNECTIONS_PER_ADDRESS", "20")
    app = create_app(tracking_env(Tracker()), EchoAction, EchoObservation, max_concurrent_envs=4)
    with running_server(app) as url, ExitStack() as stack:
        port = int(url.rsplit(":", 1)[1])
        for _ in range(150):  # far past uvicorn's limit of 2 x 4 + 64 connections
            stack.enter_context(socket.create_connection(("127.0.0.1", port)))
        assert status(url, "/health", OTHER) == 200 and status(url, "/ready", OTHER) == 200
        assert episode(url) == ["observation", "observation"]


def test_a_served_apps_own_smaller_capacity_caps_one_addresss_sockets() -> None:
    """``create_app(max_concurrent_envs=4)`` served by ``python -m openenv_runtime.serve``: one
    address gets 4 + 32 connections (and a few for probes), not the launch default's 132."""
    port = free_port()
    process = spawn_server("tests.fixtures.echo_app:small_app", port)
    try:
        with ExitStack() as stack:
            for _ in range(60):
                stack.enter_context(socket.create_connection(("127.0.0.1", port)))
            assert status(f"http://127.0.0.1:{port}", "/health") == 503
            assert status(f"http://127.0.0.1:{port}", "/health", OTHER) == 200
    finally:
        stop_process(process)


def test_sockets_that_never_send_headers_are_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADER_TIMEOUT", "0.5")
    app = create_app(tracking_env(Tracker()), EchoAction, EchoObservation)
    with running_server(app) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHo")
            sock.settimeout(10)
            assert sock.recv(1024) == b""  # the server hung up


def hung_up(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (reads nothing more than the end of the stream)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1024) == b""
    except ConnectionError:
        return True


def test_a_trickled_second_request_is_cut_at_the_header_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HEADER_TIMEOUT", "0.5")
    monkeypatch.setenv("TIMEOUT_KEEP_ALIVE", "30")
    app = create_app(tracking_env(Tracker()), EchoAction, EchoObservation)
    with running_server(app) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.settimeout(10)
            for _ in range(
                2
            ):  # idle between requests is the keep-alive's business, not the deadline's
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                answer = http.client.HTTPResponse(sock)
                answer.begin()
                assert answer.status == 200 and answer.read()
                time.sleep(1.0)
            second = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 400
            closed = False
            for byte in second:  # one byte every 20 ms: 8 s in all, far past the deadline
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    closed = True
                    break
                time.sleep(0.02)
                if hung_up(sock):
                    closed = True
                    break
            assert closed, "the trickled second request kept its connection open"


def tool_app(capacity: int = 2, **kw: Any) -> Any:
    class TaskTools(ToolEchoEnvironment):
        def list_splits(self) -> list[str]:
            return ["train"]

    settings = ServerSettings(**kw) if kw else None
    return create_app(TaskTools, None, None, max_concurrent_envs=capacity, settings=settings)


def test_session_less_calls_and_task_routes_count_against_capacity() -> None:
    app = tool_app(capacity=2)
    with running_server(app) as url, ExitStack() as stack:
        ws = url.replace("http", "ws") + "/ws"
        for _ in range(2):
            conn = stack.enter_context(connect(ws))
            conn.send('{"type":"reset"}')
            conn.recv(timeout=10)
        _, reply = post_json(url + "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert "capacity" in reply["error"]["message"], reply
        code, body = get_json(url + "/TaskTools/splits")
        assert code == 503 and "capacity" in body["detail"]
    # with a free slot both work, and give the slot back
    with running_server(tool_app(capacity=1)) as url:
        for _ in range(3):
            assert get_json(url + "/TaskTools/splits")[0] == 200
            _, reply = post_json(url + "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert "result" in reply
        assert wait_until(lambda: get_json(url + "/health")[1]["active_sessions"] == 0)


def test_session_less_calls_count_against_the_per_client_cap() -> None:
    app = tool_app(capacity=4, max_sessions_per_client=1)
    with running_server(app) as url, connect(url.replace("http", "ws") + "/ws") as conn:
        conn.send('{"type":"reset"}')
        conn.recv(timeout=10)
        _, reply = post_json(url + "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert "MAX_SESSIONS_PER_CLIENT" in reply["error"]["message"]
        assert get_json(url + "/TaskTools/splits")[0] == 429


ENVELOPES = {
    "80,000 unknown keys": {"jsonrpc": "2.0", "id": 1, "method": "tools/list", **{f"k{i}": 0 for i in range(80_000)}},
    "80,000 bad params": {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [0] * 80_000},
    "a 500 kB method": {"jsonrpc": "2.0", "id": 1, "method": "m" * 500_000},
    "a 500 kB id": {"jsonrpc": "2.0", "id": "i" * 500_000, "method": "nope"},
    "a 500 kB session id": {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"session_id": "s" * 500_000}},
}  # fmt: skip


@pytest.mark.parametrize("name", list(ENVELOPES))
def test_json_rpc_errors_are_bounded_on_every_path(name: str) -> None:
    envelope = json.dumps(ENVELOPES[name])
    with running_server(tool_app(capacity=4)) as url:
        replies = []
        conn = http.client.HTTPConnection(url.removeprefix("http://").split(":")[0], int(url.rsplit(":", 1)[1]), timeout=30)  # fmt: skip
        conn.request("POST", "/mcp", body=envelope, headers={"content-type": "application/json"})
        replies.append(conn.getresponse().read())
        conn.close()
        ws = url.replace("http", "ws")
        with connect(ws + "/mcp", max_size=None) as mcp:
            mcp.send(envelope)
            replies.append(mcp.recv(timeout=30))
        with connect(ws + "/ws", max_size=None) as sock:
            sock.send('{"type":"reset"}')
            sock.recv(timeout=10)
            sock.send('{"type":"mcp","data":' + envelope + "}")
            replies.append(sock.recv(timeout=30))
    assert "error" in json.loads(replies[0])  # a socket's own session ignores params.session_id
    for reply in replies:
        assert len(reply) < 4096, (name, len(reply))
