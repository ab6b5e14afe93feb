"""Auth against real servers: where a token may travel, which paths are public, what the logs show."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from openenv_runtime import create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.server.guards.auth import bearer_subprotocol
from openenv_runtime.testing import free_port as _free_port
from openenv_runtime.testing import running_server
from tests.fixtures.echo import EchoAction, EchoObservation
from tests.fixtures.tracking import Tracker, tracking_env
from tests.support.servers import get_json, wait_until

TOKEN = "s3cret-Token/with+odd=chars"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def status(url: str, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def protected_app(web: bool = True):  # type: ignore[no-untyped-def]
    app = create_app(
        tracking_env(Tracker()),
        EchoAction,
        EchoObservation,
        settings=ServerSettings(api_key=TOKEN, web_interface=web),
    )

    # routes a user adds to the app, named like the public ones
    for path in ("/healthz-evil", "/health/detail", "/web-admin", "/web/admin", "/webhook"):

        @app.get(path)
        async def private() -> dict[str, str]:
            return {"secret": "data"}

    return app


def test_public_paths_are_an_exact_list() -> None:
    with running_server(protected_app()) as url:
        assert status(url + "/health") == 200
        assert status(url + "/web/") == 200
        assert status(url + "/web/app.js") == 200  # the page's own files, by name
        for path in ("/healthz-evil", "/health/detail", "/web-admin", "/web/admin", "/webhook"):
            assert status(url + path) == 401, path
            if path != "/web/admin":  # shadowed by the page's folder: 404 once authorized
                assert status(url + path, AUTH) == 200, path
        assert status(url + "/schema") == 401 and status(url + "/docs") == 401


def test_without_the_page_only_health_is_public() -> None:
    with running_server(protected_app(web=False)) as url:
        assert status(url + "/health") == 200
        assert status(url + "/") == 401 and status(url + "/web/") == 401


def test_websocket_token_in_a_header_or_a_subprotocol_never_in_the_url() -> None:
    with running_server(protected_app()) as url:
        ws = url.replace("http", "ws") + "/ws"
        with connect(ws, additional_headers=AUTH) as conn:
            conn.send('{"type":"reset"}')
            assert '"observation"' in conn.recv(timeout=5)
        offered = ["openenv", bearer_subprotocol(TOKEN)]
        with connect(ws, subprotocols=offered) as conn:  # type: ignore[arg-type]
            assert conn.subprotocol == "openenv"
            conn.send('{"type":"reset"}')
            assert '"observation"' in conn.recv(timeout=5)
        for refused in (
            {"subprotocols": ["openenv", bearer_subprotocol("wrong")]},
            {"subprotocols": ["openenv", "openenv.bearer.!!!not-base64"]},
            {"subprotocols": ["openenv"]},
        ):
            with pytest.raises(InvalidStatus):
                connect(ws, open_timeout=5, **refused)  # type: ignore[arg-type]
        with pytest.raises(InvalidStatus):  # a token in the URL is not a credential
            connect(f"{ws}?access_token={TOKEN}", open_timeout=5)


def test_an_open_server_still_selects_the_subprotocol_the_page_offers() -> None:
    app = create_app(tracking_env(Tracker()), EchoAction, EchoObservation)
    with running_server(app) as url:
        offered = ["openenv", bearer_subprotocol("anything")]
        with connect(url.replace("http", "ws") + "/ws", subprotocols=offered) as conn:  # type: ignore[arg-type]
            assert conn.subprotocol == "openenv"


def test_credentials_in_urls_never_reach_the_log(tmp_path: Path) -> None:
    """The real server's real log (uvicorn's access log included) shows no query credential."""
    port = _free_port()
    log = tmp_path / "server.log"
    env = {
        **os.environ,
        "OPENENV_API_KEY": TOKEN,
        "PORT": str(port),
        "PYTHONUNBUFFERED": "1",
        "LOG_LEVEL": "debug",
    }
    root = Path(__file__).resolve().parents[2]
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "openenv_runtime.serve", "tests.fixtures.echo_app:app"],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            assert wait_until(lambda: _up(url), timeout=30), log.read_text()
            leaks = ("LEAK-1", "LEAK-2", "LEAK-3", "LEAK-4")
            status(f"{url}/health?access_token={leaks[0]}&x=1")
            status(f"{url}/schema?token={leaks[1]}")
            status(f"{url}/metadata?api_key={leaks[2]}", AUTH)
            with pytest.raises(InvalidStatus):
                connect(f"ws://127.0.0.1:{port}/ws?access_token={leaks[3]}", open_timeout=5)
            with connect(f"ws://127.0.0.1:{port}/ws?api-key={leaks[3]}", additional_headers=AUTH):
                pass
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(20)
    text = log.read_text()
    assert "GET /health?access_token=[redacted]&x=1" in text, (
        text
    )  # the line is there, the value is not
    for leak in (*leaks, TOKEN):
        assert leak not in text, text


def _up(url: str) -> bool:
    try:
        return get_json(url + "/health")[0] == 200
    except OSError:
        return False
