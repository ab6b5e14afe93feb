"""Logs keep no credential (server and client), pages run no injected script, drains reach every
worker, the warm pool stays within capacity, and openenv.yaml cannot hang the loaders."""

from __future__ import annotations

import io
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import connect

from openenv_cli.manifest import inspect_manifest
from openenv_runtime import Environment, GenericEnvClient, State, create_app
from openenv_runtime.errors import EnvironmentContractError
from openenv_runtime.server import ServerSettings
from openenv_runtime.server.config.settings import load_settings
from openenv_runtime.testing import free_port, running_server
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation
from tests.support.servers import get_json, post_json, spawn_server, stop_process, wait_until

pytestmark = pytest.mark.integration  # real servers on real sockets

SPELLINGS = (
    "access_token",
    "auth",
    "key",
    "password",
    "access%5Ftoken",
    "api%2Dkey",
    "session_id",
    "sig",  # signed URLs (sig=, X-Amz-Signature=)
    "X-Amz-Signature",
    "jwt",
)


def test_trace_logs_keep_no_credential(tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "server.log"
    with log.open("w") as out:
        process = spawn_server(
            "tests.fixtures.echo_app:app", port, env={"LOG_LEVEL": "trace"}, output=out
        )
        try:
            url = f"http://127.0.0.1:{port}"
            leaks = [f"LEAK{i}x" for i in range(len(SPELLINGS))]
            for name, leak in zip(SPELLINGS, leaks, strict=True):
                get_json(f"{url}/health?{name}={leak}&x=1")
            session = post_json(url + "/reset")[1]["session_id"]
            get_json(f"{url}/state?session_id={session}")
            headers = {
                "X-OpenEnv-Session": "a-resumable-session-key",
                "Authorization": "Bearer TOK1",
            }
            with connect(url.replace("http", "ws") + "/ws", additional_headers=headers) as conn:
                token = conn.response.headers["X-OpenEnv-Resume-Token"]
        finally:
            stop_process(process)
    text = log.read_text()
    assert "/state?session_id=[redacted]" in text  # the line is there, the value is not
    for secret in (*leaks, session, token, "TOK1"):
        assert secret not in text, secret


def test_the_client_logs_no_authorization_header() -> None:
    records = io.StringIO()
    handler = logging.StreamHandler(records)
    logger = logging.getLogger("websockets.client")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    app = create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        settings=ServerSettings(api_key="CLIENT-SECRET"),
    )
    try:
        with running_server(app) as url, GenericEnvClient(url, token="CLIENT-SECRET").sync() as env:
            env.reset()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
    text = records.getvalue()
    assert "Authorization" in text and "CLIENT-SECRET" not in text


def test_docs_pages_escape_the_name_and_carry_a_csp() -> None:
    name = "</title><script>alert(1)</script>"
    app = create_app(EchoEnvironment, EchoAction, EchoObservation, env_name=name)
    with running_server(app) as url:
        import urllib.request

        for path in ("/docs", "/redoc"):
            with urllib.request.urlopen(url + path, timeout=10) as response:
                page = response.read().decode()
                csp = response.headers["Content-Security-Policy"]
            assert "<script>alert(1)" not in page and "&lt;/title&gt;" in page
            assert "script-src 'nonce-" in csp and "default-src 'none'" in csp
        with urllib.request.urlopen(url + "/web/", timeout=10) as response:
            csp = response.headers["Content-Security-Policy"]
        assert "connect-src 'self';" in csp and "ws:" not in csp


def test_admin_drain_drains_every_worker() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = spawn_server(
        "tests.fixtures.echo_app:app", port, workers=2, env={"OPENENV_ADMIN_TOKEN": "adm"}
    )
    try:
        pids: set[int] = set()
        assert wait_until(lambda: pids.add(get_json(url + "/health")[1]["pid"]) or len(pids) == 2)
        assert post_json(url + "/admin/drain", headers={"X-OpenEnv-Admin-Token": "adm"})[0] == 202
        draining: set[int] = set()

        def both_draining() -> bool:
            health = get_json(url + "/health")[1]
            if health["status"] == "draining":
                draining.add(health["pid"])
            return draining == pids

        assert wait_until(both_draining, timeout=20)
    finally:
        stop_process(process)


def test_the_warm_pool_never_holds_more_instances_than_the_capacity() -> None:
    alive: list[int] = [0, 0]  # now, most ever

    class Slow(Environment[EchoAction, EchoObservation, State]):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            time.sleep(0.3)
            alive[0] += 1
            alive[1] = max(alive)

        def reset(self, **kw: Any) -> EchoObservation:
            return EchoObservation(echoed_message="ready")

        def step(self, action: EchoAction, **kw: Any) -> EchoObservation:
            return EchoObservation(echoed_message=action.message)

        @property
        def state(self) -> State:
            return State()

        def close(self) -> None:
            time.sleep(0.2)
            alive[0] -= 1

    app = create_app(
        Slow,
        EchoAction,
        EchoObservation,
        max_concurrent_envs=1,
        settings=ServerSettings(warm_pool=1),
    )
    with running_server(app) as url:
        for _ in range(3):  # connect while the pool builds; release while it refills
            with connect(url.replace("http", "ws") + "/ws") as conn:
                conn.send('{"type":"reset"}')
                json.loads(conn.recv(timeout=10))
    assert alive[1] == 1


BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "server: {max_concurrent_envs: *i}\n"
)


@pytest.mark.parametrize(
    "text",
    [BOMB, "[" * 100_000, "x: " + "y" * (16 << 20), "server:" + "\n  - a" * 10 + "\n" + "{" * 70],
    ids=["alias bomb", "100k deep", "16 MB", "70 deep"],
)
def test_openenv_yaml_is_read_within_bounds(text: str, tmp_path: Path) -> None:
    (tmp_path / "openenv.yaml").write_text(text)
    started = time.monotonic()
    with pytest.raises(EnvironmentContractError):
        load_settings(environ={}, manifest=tmp_path / "openenv.yaml")
    report = inspect_manifest(tmp_path)
    assert report.errors and "openenv.yaml" in report.errors[0].message
    assert time.monotonic() - started < 30  # seconds, not minutes (one generous bound)


def test_a_plain_manifest_still_loads() -> None:
    from openenv_runtime.bounded_yaml import YamlRefused, load_bounded

    assert load_bounded("server:\n  workers: 2\n") == {"server": {"workers": 2}}
    with pytest.raises(YamlRefused):
        load_bounded("a: &x 1\nb: *x\n")
