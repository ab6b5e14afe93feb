"""Session life cycles against a real server: capacity, and close() exactly once however a session ends."""

from __future__ import annotations

import base64
import json
import os
import socket
from contextlib import ExitStack

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from openenv_runtime import create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import running_server
from tests.fixtures.echo import EchoAction, EchoObservation
from tests.fixtures.tracking import Tracker, tracking_env
from tests.support.servers import active_sessions, get_json, wait_until


def make_app(tracker: Tracker, **settings: object):  # type: ignore[no-untyped-def]
    return create_app(
        tracking_env(tracker),
        EchoAction,
        EchoObservation,
        settings=ServerSettings(web_interface=False, **settings),
    )


def ws_url(base: str) -> str:
    return base.replace("http", "ws") + "/ws"


def test_capacity_refuses_then_frees_the_slot_at_once() -> None:
    tracker = Tracker()
    with running_server(make_app(tracker, max_concurrent_envs=2)) as url, ExitStack() as stack:
        first, second = (stack.enter_context(connect(ws_url(url))) for _ in range(2))
        for conn in (first, second):
            conn.send('{"type":"reset"}')
            conn.recv(timeout=5)
        with connect(ws_url(url)) as third:
            reply = json.loads(third.recv(timeout=5))
            assert reply["data"]["code"] == "CAPACITY_REACHED"
            assert (reply["data"]["active_sessions"], reply["data"]["max_sessions"]) == (2, 2)
            with pytest.raises(ConnectionClosed):
                third.recv(timeout=5)
        assert tracker.created == 2  # no environment was made for the refused connection
        first.close()
        assert wait_until(lambda: active_sessions(url) == 1)
        with connect(ws_url(url)) as fourth:
            fourth.send('{"type":"reset"}')
            assert json.loads(fourth.recv(timeout=5))["type"] == "observation"
        second.close()
        assert wait_until(lambda: active_sessions(url) == 0)
    assert tracker.closed_more_than_once() == [] and tracker.closed_total() == 3


def test_idle_sessions_are_reaped() -> None:
    tracker = Tracker()
    with (
        running_server(make_app(tracker, session_timeout=0.3)) as url,
        connect(ws_url(url)) as conn,
    ):
        conn.send('{"type":"reset"}')
        conn.recv(timeout=5)
        with pytest.raises(ConnectionClosed):
            conn.recv(timeout=10)  # the server closes the idle session
        assert wait_until(lambda: active_sessions(url) == 0)
        # the slot is freed first, then the environment closed: wait for that close
        assert wait_until(lambda: tracker.closes == {1: 1})


def test_a_long_step_is_not_reaped_as_idle() -> None:
    tracker = Tracker()
    with (
        running_server(make_app(tracker, session_timeout=0.2)) as url,
        connect(ws_url(url)) as conn,
    ):
        conn.send(json.dumps({"type": "step", "data": {"message": "slow", "wait": 1.0}}))
        assert json.loads(conn.recv(timeout=10))["type"] == "observation"


def test_long_step_survives_keepalive_pings() -> None:
    tracker = Tracker()
    app = make_app(tracker)
    with (
        running_server(app, ws_ping_interval=0.1, ws_ping_timeout=0.2) as url,
        connect(ws_url(url), ping_interval=0.1, ping_timeout=0.2) as conn,
    ):
        conn.send(json.dumps({"type": "step", "data": {"message": "slow", "wait": 1.5}}))
        assert json.loads(conn.recv(timeout=10))["data"]["observation"]["echoed_message"] == "slow"


def _raw_handshake(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    assert b"101" in sock.recv(1024).split(b"\r\n")[0]
    return sock


def test_half_open_connection_is_found_by_keepalive() -> None:
    tracker = Tracker()
    with running_server(make_app(tracker), ws_ping_interval=0.2, ws_ping_timeout=0.3) as url:
        port = int(url.rsplit(":", 1)[1])
        silent = _raw_handshake(port)  # completes the handshake, then never answers a ping
        assert wait_until(lambda: active_sessions(url) == 1)
        assert wait_until(lambda: active_sessions(url) == 0, timeout=10)
        silent.close()
        assert wait_until(lambda: tracker.closed_total() == 1)


def test_client_vanishing_mid_step_frees_the_slot() -> None:
    tracker = Tracker()
    with running_server(make_app(tracker)) as url, ExitStack() as stack:
        conn = stack.enter_context(connect(ws_url(url)))
        conn.send(json.dumps({"type": "step", "data": {"message": "slow", "wait": 0.5}}))
        conn.socket.shutdown(socket.SHUT_RDWR)  # vanish without a close frame
        conn.socket.close()
        assert wait_until(lambda: active_sessions(url) == 0, timeout=10)
        assert wait_until(lambda: tracker.closed_total() == 1)
        assert get_json(url + "/health")[0] == 200


def test_thousand_connect_disconnect_cycles_leak_nothing() -> None:
    tracker = Tracker()
    with running_server(make_app(tracker, max_concurrent_envs=20)) as url:
        port = int(url.rsplit(":", 1)[1])
        for i in range(1000):
            if i % 2:
                with connect(ws_url(url)) as conn:
                    if i % 3 == 0:
                        conn.send('{"type":"reset"}')
                        conn.recv(timeout=5)
            else:
                _raw_handshake(port).close()  # abrupt: no close frame
        assert wait_until(lambda: active_sessions(url) == 0, timeout=20)
        assert wait_until(lambda: tracker.closed_total() == 1000, timeout=20)
        assert tracker.closed_more_than_once() == []
        with connect(ws_url(url)) as conn:
            conn.send('{"type":"reset"}')
            assert json.loads(conn.recv(timeout=5))["type"] == "observation"


def test_server_shutdown_closes_every_environment() -> None:
    tracker = Tracker()
    with ExitStack() as stack:
        with running_server(make_app(tracker)) as url:
            conns = [stack.enter_context(connect(ws_url(url))) for _ in range(3)]
            for conn in conns:
                conn.send('{"type":"reset"}')
                conn.recv(timeout=5)
        assert wait_until(lambda: tracker.closed_total() == 3)
        assert tracker.closed_more_than_once() == []
        for conn in conns:
            with pytest.raises(ConnectionClosed):
                conn.recv(timeout=5)


def test_many_concurrent_sessions_are_isolated() -> None:
    tracker = Tracker()
    with running_server(make_app(tracker)) as url, ExitStack() as stack:
        conns = [stack.enter_context(connect(ws_url(url))) for _ in range(50)]
        for i, conn in enumerate(conns):
            conn.send(json.dumps({"type": "reset", "data": {"episode_id": f"e{i}"}}))
            conn.recv(timeout=5)
            for _ in range(i % 4):
                conn.send(json.dumps({"type": "step", "data": {"message": "x"}}))
                conn.recv(timeout=5)
        for i, conn in enumerate(conns):
            conn.send('{"type":"state"}')
            state = json.loads(conn.recv(timeout=5))["data"]
            assert state == {"episode_id": f"e{i}", "step_count": i % 4}
            conn.close()
        assert wait_until(lambda: active_sessions(url) == 0)
