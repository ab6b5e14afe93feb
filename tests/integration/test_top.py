"""``openenv top`` against a real two-worker server: the sessions, capacity and steps it reports
are the server's, its rates move while steps are answered, and a replica that is down is an
``error`` object beside the others."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from websockets.sync.client import ClientConnection, connect

from openenv_cli.main import app as cli
from openenv_runtime.testing import free_port
from tests.support.servers import spawn_server, stop_process, wait_until

CAPACITY = 4  # per worker
SESSIONS, STEPS_PER_SESSION = 3, 5
runner = CliRunner()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = free_port()
    process = spawn_server(
        "tests.fixtures.echo_app:app",
        port,
        workers=2,
        env={"MAX_CONCURRENT_ENVS": str(CAPACITY), "SESSION_TIMEOUT": "0"},
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(process)


def ask(ws: ClientConnection, kind: str, data: object) -> dict[str, Any]:
    ws.send(json.dumps({"type": kind, "data": data}))
    reply: dict[str, Any] = json.loads(ws.recv(timeout=30))
    assert reply["type"] == "observation", reply
    return reply


def top(*args: str) -> list[dict[str, Any]]:
    result = runner.invoke(cli, ["top", *args, "--once", "--json"])
    assert result.exit_code == 0, result.output
    views: list[dict[str, Any]] = json.loads(result.stdout)
    return views


def test_top_reports_the_servers_sessions_capacity_and_steps(server: str) -> None:
    down = f"127.0.0.1:{free_port()}"  # nothing listens there
    with ExitStack() as stack:
        sessions = [
            stack.enter_context(connect(server.replace("http", "ws") + "/ws", open_timeout=30))
            for _ in range(SESSIONS)
        ]
        for ws in sessions:
            ask(ws, "reset", {})
            for _ in range(STEPS_PER_SESSION):
                ask(ws, "step", {"message": "hi"})
        seen: list[dict[str, Any]] = []

        def reports_them() -> bool:
            seen[:] = top(server, down, "--interval", "0.1")
            # the other worker's counts arrive within its flush interval: a bounded wait
            expected = {
                "steps": SESSIONS * STEPS_PER_SESSION,
                "sessions": SESSIONS,
                "capacity": 2 * CAPACITY,
                "workers": 2,
            }
            return all(seen[0].get(k) == v for k, v in expected.items())

        assert wait_until(reports_them, timeout=30, interval=0.3), seen
        replica, gone = seen
        assert replica["url"] == server
        assert replica["status"] == "healthy" and replica["refused"] == 0
        assert replica["stuck"] == 0 and replica["version"]
        assert set(gone) == {"url", "error"} and gone["url"] == f"http://{down}"
        assert "unreachable" in gone["error"]


def test_steps_per_second_and_latency_cover_the_window(server: str) -> None:
    stop = threading.Event()

    def steps() -> None:
        with connect(server.replace("http", "ws") + "/ws", open_timeout=30) as ws:
            ask(ws, "reset", {})
            while not stop.is_set():
                ask(ws, "step", {"message": "hi"})

    stepper = threading.Thread(target=steps)
    stepper.start()
    seen: list[dict[str, Any]] = []
    try:

        def moving() -> bool:
            # longer than a worker's flush interval (1 s), so the window sees its steps
            seen[:] = top(server, "--interval", "1.1")
            return bool(seen[0]["steps_per_second"]) and seen[0]["step_p99_seconds"] is not None

        assert wait_until(moving, timeout=30, interval=0.1), seen
    finally:
        stop.set()
        stepper.join(30)
    view = seen[0]
    assert view["window_seconds"] >= 1.1
    assert 0 < view["step_p50_seconds"] <= view["step_p99_seconds"]


def test_deploy_folder_replicas_are_watched(server: str, tmp_path: Path) -> None:
    out = tmp_path / "front"
    backend = server.removeprefix("http://")
    deployed = runner.invoke(
        cli, ["deploy", "envoy", str(tmp_path), "--backend", backend, "--out", str(out)]
    )
    assert deployed.exit_code == 0, deployed.output
    seen: list[dict[str, Any]] = []

    def both_workers() -> bool:  # a worker's gauges arrive within its flush interval
        seen[:] = top("--deploy", str(out), "--interval", "0.1")
        return seen[0].get("capacity") == 2 * CAPACITY

    assert wait_until(both_workers, timeout=30, interval=0.3), seen
    assert [view["url"] for view in seen] == [server]
