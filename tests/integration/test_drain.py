"""Draining for rolling updates, and shutdown: on real servers (in-process and as processes)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from openenv_runtime.testing import free_port, running_server
from tests.fixtures.counter import CounterAction, CounterClient, Lifecycle, make_app
from tests.support.servers import get_json, post_json, spawn_server, wait_until

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]
ADMIN = {"X-OpenEnv-Admin-Token": "let-me-drain"}


def health(url: str) -> dict[str, object]:
    return get_json(url + "/health")[1]  # type: ignore[no-any-return]


def ws(url: str) -> str:
    return url.replace("http", "ws") + "/ws"


def test_drain_lets_running_episodes_finish_and_refuses_new_sessions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENENV_ADMIN_TOKEN", ADMIN["X-OpenEnv-Admin-Token"])
    life = Lifecycle()
    with running_server(make_app(life, drain_timeout=30)) as url:
        assert get_json(url + "/ready") == (
            200,
            {"status": "ready", "active_sessions": 0, "max_sessions": 100},
        )
        running = CounterClient(url).sync()
        running.reset(limit=3)
        running.step(CounterAction())  # mid-episode
        finished = CounterClient(url).sync()
        finished.reset(limit=1)
        assert finished.step(CounterAction()).done  # between episodes
        idle = connect(ws(url))  # never reset
        assert wait_until(lambda: health(url)["active_sessions"] == 3)

        assert post_json(url + "/admin/drain")[0] == 403
        assert post_json(url + "/admin/drain", headers={"X-OpenEnv-Admin-Token": "no"})[0] == 403
        status, body = post_json(url + "/admin/drain", headers=ADMIN)
        assert status == 202 and body["status"] == "draining"

        assert health(url)["status"] == "draining"
        assert get_json(url + "/ready")[0] == 503
        with pytest.raises(InvalidStatus) as info:
            connect(ws(url))
        assert info.value.response.status_code == 503
        with pytest.raises(ConnectionClosed):
            idle.recv(timeout=10)  # ended at once: no episode running
        assert wait_until(lambda: health(url)["active_sessions"] == 1)

        assert running.step(CounterAction()).observation.total == 2  # the episode goes on
        assert running.step(CounterAction()).done  # ... to its end, then the session closes
        assert wait_until(lambda: health(url)["active_sessions"] == 0)
        # a session leaves the count before its instance's close() has run on the pool thread
        assert wait_until(lambda: life.closed_total() == 3)
        assert life.created == 3 and life.closed_more_than_once() == []


def test_the_drain_timeout_closes_what_still_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_ADMIN_TOKEN", ADMIN["X-OpenEnv-Admin-Token"])
    life = Lifecycle()
    with running_server(make_app(life, drain_timeout=0.5)) as url:
        env = CounterClient(url, resume=False).sync()
        env.reset(limit=100)
        env.step(CounterAction())
        assert post_json(url + "/admin/drain", headers=ADMIN)[0] == 202
        assert wait_until(lambda: health(url)["active_sessions"] == 0)
        assert wait_until(lambda: life.closed_total() == life.created == 1)


def test_admin_drain_is_off_without_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENENV_ADMIN_TOKEN", raising=False)
    with running_server(make_app(Lifecycle())) as url:
        assert post_json(url + "/admin/drain", headers=ADMIN)[0] == 404
        assert health(url)["status"] == "healthy"


def test_ready_says_full() -> None:
    life = Lifecycle()
    with running_server(make_app(life, max_concurrent_envs=1)) as url:
        with CounterClient(url).sync() as env:
            env.reset()
            status, body = get_json(url + "/ready")
            assert (status, body["status"]) == (503, "full")
        assert wait_until(lambda: get_json(url + "/ready")[0] == 200)


def start_server(
    tmp_path: Path, workers: int = 1, **env: str
) -> tuple[subprocess.Popen[bytes], str, Path]:
    port = free_port()
    log = tmp_path / "closes.log"
    process = spawn_server(
        "tests.fixtures.counter:app",
        port,
        workers=workers,
        env={"COUNTER_CLOSE_LOG": str(log), **env},
        output=None,
    )
    return process, f"http://127.0.0.1:{port}", log


def test_sigterm_with_long_steps_closes_every_instance_once_and_exits_0(tmp_path: Path) -> None:
    process, url, log = start_server(tmp_path, DRAIN_TIMEOUT="1")
    try:
        clients = [connect(ws(url)) for _ in range(3)]
        for c in clients:
            c.send('{"type":"reset"}')
            c.recv(timeout=10)
        for c in clients[:2]:  # steps far longer than any shutdown timeout
            c.send(json.dumps({"type": "step", "data": {"wait": 60}}))
        assert wait_until(lambda: health(url)["active_sessions"] == 3)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=40) == 0
        took = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
    lines = log.read_text().splitlines()
    assert len(lines) == 3 and len(set(lines)) == 3  # each of the 3 instances closed once
    assert took < 30  # bounded: drain timeout + a bounded wait for the running steps


def test_sigterm_drains_with_two_workers(tmp_path: Path) -> None:
    process, url, log = start_server(tmp_path, workers=2, DRAIN_TIMEOUT="20")
    try:
        env = CounterClient(url).sync()
        env.reset(limit=2)
        env.step(CounterAction())
        process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert env.step(CounterAction()).done  # the running episode finishes during the drain
        assert process.wait(timeout=40) == 0
    finally:
        if process.poll() is None:
            process.kill()
    lines = log.read_text().splitlines()
    assert len(lines) == 1
