"""Limits and timeouts against real servers: no client can make the server hold too much or wedge it."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from openenv_runtime import Environment, State, create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import running_server
from tests.fixtures.echo import EchoAction, EchoObservation
from tests.fixtures.tracking import Tracker, tracking_env
from tests.support.servers import active_sessions, get_json, post_json, wait_until


def ws(url: str, **kw: Any) -> ClientConnection:
    return connect(url.replace("http", "ws") + "/ws", open_timeout=5, **kw)


def ask(conn: ClientConnection, frame: dict[str, Any] | str) -> dict[str, Any]:
    conn.send(frame if isinstance(frame, str) else json.dumps(frame))
    reply: dict[str, Any] = json.loads(conn.recv(timeout=10))
    return reply


def post_raw(url: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


# -- message and body size ---------------------------------------------------------------------


def test_an_oversized_frame_is_refused_by_the_protocol_layer_with_1009() -> None:
    app = create_app(
        tracking_env(Tracker()),
        EchoAction,
        EchoObservation,
        settings=ServerSettings(max_message_bytes=4096),
    )
    with running_server(app) as url, ws(url) as conn:
        ask(conn, {"type": "reset"})
        with pytest.raises(ConnectionClosed) as info:
            conn.send(json.dumps({"type": "step", "data": {"message": "x" * 16_384}}))
            conn.recv(timeout=10)
        assert info.value.rcvd is not None and info.value.rcvd.code == 1009
        assert wait_until(lambda: active_sessions(url) == 0)


def test_an_oversized_http_body_gets_413_declared_or_chunked() -> None:
    app = create_app(
        tracking_env(Tracker()),
        EchoAction,
        EchoObservation,
        settings=ServerSettings(max_message_bytes=4096),
    )
    big = json.dumps({"action": {"message": "x" * 10_000}}).encode()
    with running_server(app) as url:
        status, body = post_raw(url, "/step", big, {"content-type": "application/json"})
        assert status == 413 and b"4096" in body

        def chunks() -> Iterator[bytes]:
            for _ in range(10):
                yield b"x" * 1000

        host, port = url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request(
            "POST", "/reset", body=chunks(), headers={"content-type": "application/json"},
            encode_chunked=True,
        )  # fmt: skip
        response = conn.getresponse()
        assert response.status == 413
        conn.close()
        assert get_json(url + "/health")[0] == 200


def test_validation_replies_are_bounded() -> None:
    app = create_app(tracking_env(Tracker()), EchoAction, EchoObservation)
    with running_server(app) as url, ws(url) as conn:
        ask(conn, {"type": "reset"})
        many = {f"f{i}": 0 for i in range(80_000)}
        frame = json.dumps({"type": "step", "data": {"message": "x", **many}})
        assert len(frame) < 1 << 20
        conn.send(frame)
        raw = conn.recv(timeout=10)
        assert len(raw) < 2_000
        reply = json.loads(raw)
        assert reply["data"]["code"] == "VALIDATION_ERROR"
        some = {f"g{i}": 0 for i in range(60)}  # few enough to validate: errors quoted up to 20
        reply = ask(conn, {"type": "step", "data": {"message": "x", **some}})
        assert len(reply["data"]["errors"]) == 20 and reply["data"]["error_count"] == 60
        assert ask(conn, {"type": "step", "data": {"message": "ok"}})["type"] == "observation"
        status, body = post_json(url + "/reset")
        status, body = post_json(
            url + "/step", {"action": {"message": "x", **some}, "session_id": body["session_id"]}
        )
        assert status == 422 and len(body["errors"]) == 20 and body["error_count"] == 60


# -- step timeout ------------------------------------------------------------------------------


class Gate:
    """Steps asking for ``hang`` block until the test opens the gate."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.closed = 0
        self.lock = threading.Lock()


def hanging_env(gate: Gate) -> type[Environment[Any, Any, Any]]:
    class Hanging(Environment[EchoAction, EchoObservation, State]):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def reset(self, **kw: object) -> EchoObservation:
            return EchoObservation(echoed_message="ready")

        def step(self, action: EchoAction, **kw: object) -> EchoObservation:
            if action.message == "hang":
                gate.event.wait(30)
            return EchoObservation(echoed_message=action.message)

        @property
        def state(self) -> State:
            return State()

        def close(self) -> None:
            with gate.lock:
                gate.closed += 1

    return Hanging


@contextmanager
def gated_server(**settings: Any) -> Iterator[tuple[str, Gate]]:
    gate = Gate()
    app = create_app(
        hanging_env(gate), EchoAction, EchoObservation, settings=ServerSettings(**settings)
    )
    try:
        with running_server(app) as url:
            yield url, gate
    finally:
        gate.event.set()


def test_a_hung_step_ends_its_session_frees_its_slot_and_is_counted() -> None:
    with gated_server(step_timeout=0.3, max_concurrent_envs=1) as (url, gate), ws(url) as conn:
        ask(conn, {"type": "reset"})
        reply = ask(conn, {"type": "step", "data": {"message": "hang"}})
        assert (
            reply["data"]["code"] == "STEP_TIMEOUT" and "STEP_TIMEOUT" in reply["data"]["message"]
        )
        with pytest.raises(ConnectionClosed) as info:
            conn.recv(timeout=5)
        assert info.value.rcvd is not None and info.value.rcvd.code == 1011
        health = get_json(url + "/health")[1]
        assert (health["active_sessions"], health["abandoned_sessions"]) == (0, 1)
        with ws(url) as other:  # the only slot is free again
            ask(other, {"type": "reset"})
            assert ask(other, {"type": "step", "data": {"message": "ok"}})["type"] == "observation"
        assert wait_until(
            lambda: gate.closed == 1
        )  # the fresh session's instance; the stuck one is not closed yet
        gate.event.set()
        assert wait_until(lambda: gate.closed == 2)  # closed once its call returned
        assert get_json(url + "/health")[1]["stuck_threads"] == 0


def test_hung_steps_do_not_starve_the_pool() -> None:
    with (
        gated_server(step_timeout=0.3, sync_pool_size=2) as (url, _),
        ExitStack() as stack,
    ):
        for _ in range(4):  # twice the pool
            conn = stack.enter_context(ws(url))
            ask(conn, {"type": "reset"})
            assert ask(conn, {"type": "step", "data": {"message": "hang"}})["data"]["code"] == (
                "STEP_TIMEOUT"
            )
        with ws(url) as conn:
            ask(conn, {"type": "reset"})
            for _ in range(5):
                assert (
                    ask(conn, {"type": "step", "data": {"message": "ok"}})["type"] == "observation"
                )
        assert get_json(url + "/health")[1]["abandoned_sessions"] == 4


def test_a_hung_http_step_gets_504_and_its_session_ends() -> None:
    with gated_server(step_timeout=0.3) as (url, _):
        session = post_json(url + "/reset")[1]["session_id"]
        status, body = post_json(
            url + "/step", {"action": {"message": "hang"}, "session_id": session}
        )
        assert status == 504 and body["code"] == "STEP_TIMEOUT"
        assert (
            post_json(url + "/step", {"action": {"message": "x"}, "session_id": session})[0] == 404
        )
        assert active_sessions(url) == 0


# -- sessions per client, HTTP expiry, proxies, connections ----------------------------------


def test_per_client_cap_covers_websocket_and_http() -> None:
    app = create_app(
        tracking_env(Tracker()),
        EchoAction,
        EchoObservation,
        settings=ServerSettings(max_sessions_per_client=2),
    )
    with running_server(app) as url, ExitStack() as stack:
        first = stack.enter_context(ws(url))
        ask(first, {"type": "reset"})
        status, body = post_json(url + "/reset")
        assert status == 200
        reply = json.loads(stack.enter_context(ws(url)).recv(timeout=5))  # refused at once
        assert (
            reply["data"]["code"] == "CAPACITY_REACHED"
            and reply["data"]["max_sessions_per_client"] == 2
        )
        status, refused = post_json(url + "/reset")
        assert status == 429 and refused["code"] == "CAPACITY_REACHED"
        post_json(url + "/close", {"session_id": body["session_id"]})
        assert post_json(url + "/reset")[0] == 200  # a slot of this client is free again


def test_per_client_cap_counts_the_token_when_auth_is_on() -> None:
    app = create_app(
        tracking_env(Tracker()),
        EchoAction,
        EchoObservation,
        settings=ServerSettings(api_key="k", max_sessions_per_client=1),
    )
    auth = {"Authorization": "Bearer k"}
    with running_server(app) as url:
        assert post_json(url + "/reset", headers=auth)[0] == 200
        assert post_json(url + "/reset", headers=auth)[0] == 429


def test_http_sessions_expire_like_websocket_ones() -> None:
    app = create_app(
        tracking_env(Tracker()),
        EchoAction,
        EchoObservation,
        settings=ServerSettings(session_timeout=0.3),
    )
    with running_server(app) as url:
        session = post_json(url + "/reset")[1]["session_id"]
        assert wait_until(lambda: active_sessions(url) == 0, timeout=10)
        assert (
            post_json(url + "/step", {"action": {"message": "x"}, "session_id": session})[0] == 404
        )


@pytest.mark.parametrize(("trusted", "both_allowed"), [("127.0.0.1", True), ("10.9.9.9", False)])
def test_x_forwarded_for_counts_only_from_trusted_proxies(trusted: str, both_allowed: bool) -> None:
    app = create_app(
        tracking_env(Tracker()),
        EchoAction,
        EchoObservation,
        settings=ServerSettings(max_sessions_per_client=1),
    )
    with running_server(app, forwarded_allow_ips=trusted) as url:
        statuses = [
            post_json(url + "/reset", headers={"X-Forwarded-For": address})[0]
            for address in ("203.0.113.1", "203.0.113.2")
        ]
    assert statuses == ([200, 200] if both_allowed else [200, 429])


def test_the_default_trusts_only_loopback_proxies() -> None:
    assert ServerSettings().forwarded_allow_ips == "127.0.0.1,::1"


def status_of(url: str, path: str = "/health", source: str | None = None) -> int:
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    conn = http.client.HTTPConnection(
        host, int(port), timeout=10, source_address=(source, 0) if source else None
    )
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def test_connections_per_server_are_bounded_but_probes_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LIMIT_CONCURRENCY", "3")
    app = create_app(tracking_env(Tracker()), EchoAction, EchoObservation)
    with running_server(app) as url, ExitStack() as stack:
        for _ in range(4):
            ask(stack.enter_context(ws(url)), {"type": "reset"})
        assert status_of(url, "/schema") == 503
        assert status_of(url) == 200 and status_of(url, "/ready") == 200


def test_a_slow_header_client_is_cut_off_and_probes_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HEADER_TIMEOUT", "1")
    app = create_app(tracking_env(Tracker()), EchoAction, EchoObservation, max_concurrent_envs=1)
    limit = app.state.openenv_settings.values.connection_limit
    assert limit == 2 * 1 + 64  # bounded by default, with room for every session
    with running_server(app) as url, ExitStack() as stack:
        port = int(url.rsplit(":", 1)[1])
        stalled = []
        for _ in range(limit):  # connections that send half a request line and stall
            sock = stack.enter_context(socket.create_connection(("127.0.0.1", port)))
            try:
                sock.sendall(b"GET /health HTTP/1.1\r\nHo")
            except OSError:
                pass  # refused at once: its address holds too many connections
            stalled.append(sock)
        # a probe from another address answers at once (this one holds all it may)
        assert status_of(url, source="127.0.0.2") == 200
        for sock in stalled:  # each is closed by the server: EOF, not a hang
            sock.settimeout(10)
            try:
                assert sock.recv(1024) is not None
            except ConnectionResetError:
                pass


def test_http_environment_errors_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(tracking_env(Tracker()), EchoAction, EchoObservation)
    with running_server(app) as url:
        session = post_json(url + "/reset")[1]["session_id"]
        status, _ = post_json(url + "/step", {"action": {"message": "boom"}, "session_id": session})
    assert status == 500
    logged = [r for r in caplog.records if r.name == "openenv_runtime.server" and r.exc_info]
    assert logged and "bad move" in str(logged[0].exc_info[1])  # type: ignore[index]
