"""A full server behind a balancer refuses with HTTP 503 before the upgrade; direct clients
still get the CAPACITY_REACHED message. Seen by raw WebSocket clients, our client, EnvPool,
openenv-core 0.3.0's and openenv 0.10.0's clients, and through a real Envoy rendered by
``openenv deploy envoy`` in front of two replicas of capacity 1 and 8."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

import openenv_runtime.client.pool
from openenv_runtime import EnvError, EnvPool, GenericEnvClient, create_app
from openenv_runtime.providers import ProcessProvider
from openenv_runtime.providers.base import health
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import free_port, running_server
from tests.fixtures.echo import EchoAction, EchoObservation
from tests.fixtures.tracking import Tracker, tracking_env
from tests.support.deploy_tools import envoy_process, envoy_validate, openenv, wait_for
from tests.support.reference import SCRIPTS_DIR, openenv_python, reference_python
from tests.support.servers import get_json, server_process

pytestmark = pytest.mark.integration

BALANCER = {"x-openenv-balancer": "1"}
APP = "tests.fixtures.echo_app:app"


def full_server(tracker: Tracker, monkeypatch: pytest.MonkeyPatch, mode: str | None) -> Any:
    if mode is None:
        monkeypatch.delenv("OPENENV_CAPACITY_REFUSAL", raising=False)
    else:
        monkeypatch.setenv("OPENENV_CAPACITY_REFUSAL", mode)
    app = create_app(
        tracking_env(tracker),
        EchoAction,
        EchoObservation,
        max_concurrent_envs=1,
        settings=ServerSettings(web_interface=False),
    )
    return running_server(app)


def ws(url: str) -> str:
    return url.replace("http", "ws") + "/ws"


def refused_with_503(url: str, headers: dict[str, str]) -> InvalidStatus:
    with pytest.raises(InvalidStatus) as info, connect(ws(url), additional_headers=headers):
        pass
    return info.value


def refused_with_message(url: str, headers: dict[str, str]) -> dict[str, Any]:
    with connect(ws(url), additional_headers=headers) as conn:
        reply: dict[str, Any] = json.loads(conn.recv(timeout=5))
        return reply


@pytest.mark.parametrize(
    ("mode", "headers", "expect"),
    [
        (None, BALANCER, 503),  # auto: the balancer's header asks for a status
        (None, {}, "message"),  # auto, direct: the message, as before
        ("http", {}, 503),
        ("message", BALANCER, "message"),
    ],
)
def test_a_full_server_refuses_by_mode_and_header(
    monkeypatch: pytest.MonkeyPatch, mode: str | None, headers: dict[str, str], expect: object
) -> None:
    tracker = Tracker()
    with full_server(tracker, monkeypatch, mode) as url, connect(ws(url)) as holder:
        holder.send('{"type":"reset"}')
        holder.recv(timeout=5)
        if expect == 503:
            refusal = refused_with_503(url, headers)
            response = refusal.response
            assert response.status_code == 503
            assert response.headers["x-openenv-error"] == "CAPACITY_REACHED"
            assert response.headers["retry-after"] == "1"
            assert json.loads(response.body)["data"]["code"] == "CAPACITY_REACHED"
        else:
            reply = refused_with_message(url, headers)
            assert reply["data"]["code"] == "CAPACITY_REACHED"
            assert reply["data"]["max_sessions"] == 1
        assert tracker.created == 1  # nothing was built for the refused session
        assert get_json(url + "/health")[1]["active_sessions"] == 1


@pytest.mark.parametrize("mode", ["http", "message"])
def test_our_client_sees_capacity_reached_either_way(
    monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    tracker = Tracker()
    with full_server(tracker, monkeypatch, mode) as url, GenericEnvClient(url).sync() as holder:
        holder.reset()
        with pytest.raises(EnvError) as info, GenericEnvClient(url).sync() as refused:
            refused.reset()
        assert info.value.code == "CAPACITY_REACHED"
        if mode == "http":
            assert info.value.details["status"] == 503
            assert info.value.details["retry_after"] == "1"


def run_reference(python: Path, url: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(python), str(SCRIPTS_DIR / "ref_full_server.py"), url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=SCRIPTS_DIR,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.compat
@pytest.mark.parametrize("which", ["0.3.0", "0.10.0"])
@pytest.mark.parametrize("mode", ["http", "message"])
def test_reference_clients_fail_cleanly_either_way(
    monkeypatch: pytest.MonkeyPatch, which: str, mode: str
) -> None:
    python = reference_python() if which == "0.3.0" else openenv_python()
    tracker = Tracker()
    with full_server(tracker, monkeypatch, mode) as url, GenericEnvClient(url).sync() as holder:
        holder.reset()
        out = run_reference(python, url)
        assert out["ok"] is False
        # 503 before the upgrade: their handshake fails naming the status; otherwise their
        # reset fails with our CAPACITY_REACHED message or the close that follows it (1013).
        assert ("503" if mode == "http" else "capacity") in out["message"].lower(), out
        holder.close()
        wait_for(lambda: get_json(url + "/health")[1]["active_sessions"] == 0, 10, "a free slot")
        assert run_reference(python, url)["ok"] is True


@pytest.fixture(scope="module")
def refusing_servers() -> Iterator[list[str]]:
    """Two bench servers of 2 sessions each that refuse with HTTP 503 when full."""
    env = {"MAX_CONCURRENT_ENVS": "2", "LOG_LEVEL": "warning", "OPENENV_CAPACITY_REFUSAL": "http"}
    with ProcessProvider("openenv_cli.bench.bench_env:app", replicas=2, env=env) as urls:
        yield urls


def test_pool_moves_a_session_refused_at_the_handshake(
    refusing_servers: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    urls = refusing_servers
    real = health

    def stale(url: str, timeout: float = 5.0) -> dict[str, Any] | None:
        answer = real(url, timeout)
        if answer is not None and url == urls[0]:
            answer = {**answer, "max_sessions": 100}  # a stale view: server 0 looks roomy
        return answer

    monkeypatch.setattr(openenv_runtime.client.pool, "health", stale)

    async def go() -> None:
        async with EnvPool(GenericEnvClient, urls=urls, size=4) as pool:
            assert all(not isinstance(r, EnvError) for r in await pool.reset())
            assert Counter(pool.server_of(i) for i in range(4)) == {urls[0]: 2, urls[1]: 2}
            assert pool.failed == []

    asyncio.run(asyncio.wait_for(go(), 60))


@pytest.mark.envoy
def test_envoy_sends_sessions_past_a_full_replica(tmp_path: Path) -> None:
    ports = [free_port(), free_port()]
    front_port = free_port()
    args = ["deploy", "envoy", "--port", str(front_port), "--out", str(tmp_path / "front")]
    for port in ports:
        args += ["--backend", f"127.0.0.1:{port}"]
    done = openenv(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = tmp_path / "front" / "envoy.yaml"
    envoy_validate(config)
    front = f"http://127.0.0.1:{front_port}"
    with (
        server_process(APP, ports[0], MAX_CONCURRENT_ENVS="1"),
        server_process(APP, ports[1], MAX_CONCURRENT_ENVS="8"),
        envoy_process(config, front),
    ):
        wait_for(lambda: get_json(front + "/health")[0] == 200, 20, "healthy upstreams")
        held = [GenericEnvClient(base_url=front).sync() for _ in range(9)]
        try:
            for env in held:  # 9 sessions for 1 + 8 slots: none may fail
                env.connect()
                assert env.reset() is not None
            counts = [get_json(f"http://127.0.0.1:{p}/health")[1]["active_sessions"] for p in ports]
            assert counts == [1, 8]
            for which in ("0.3.0", "0.10.0"):  # both full now: a reference client sees a 503
                python = reference_python() if which == "0.3.0" else openenv_python()
                out = run_reference(python, front)
                assert out["ok"] is False and "503" in out["message"], out
            held.pop().close()
            for which in ("0.3.0", "0.10.0"):  # a slot is free: through Envoy, it succeeds
                python = reference_python() if which == "0.3.0" else openenv_python()
                wait_for(
                    lambda: (
                        get_json(f"http://127.0.0.1:{ports[1]}/health")[1]["active_sessions"] == 7
                    ),
                    10,
                    "a free slot",
                )
                assert run_reference(python, front)["ok"] is True
        finally:
            for env in held:
                env.close()
