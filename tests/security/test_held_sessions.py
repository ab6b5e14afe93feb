"""HTTP sessions held by one client: unused ones expire soon; a public server caps each client."""

from __future__ import annotations

import time

import httpx
import pytest

from openenv_runtime import create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.server.config.settings import load_settings
from openenv_runtime.testing import running_server
from tests.fixtures.echo import EchoAction, EchoObservation
from tests.fixtures.tracking import Tracker, tracking_env
from tests.support.servers import get_json, post_json, wait_until

pytestmark = pytest.mark.integration  # real servers on real sockets


def test_sessions_reset_but_never_stepped_expire_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UNUSED_SESSION_TIMEOUT", "0.5")
    app = create_app(
        tracking_env(Tracker()),
        EchoAction,
        EchoObservation,
        settings=ServerSettings(session_timeout=600),
    )
    with running_server(app) as url:
        unused = post_json(url + "/reset")[1]["session_id"]
        used = post_json(url + "/reset")[1]["session_id"]
        assert post_json(url + "/step", {"session_id": used, "action": {"message": "hi"}})[0] == 200
        time.sleep(0.6)
        post_json(
            url + "/step", {"session_id": used, "action": {"message": "hi"}}
        )  # keeps it alive
        # (polled through /health: a /state call would itself keep the session in use)
        assert wait_until(lambda: get_json(url + "/health")[1]["http_sessions"] == 1)
        assert get_json(url + f"/state?session_id={unused}")[0] == 404
        assert get_json(url + f"/state?session_id={used}")[0] == 200


def test_a_trainer_on_a_local_server_opens_every_session_it_needs() -> None:
    app = create_app(tracking_env(Tracker()), EchoAction, EchoObservation)
    with running_server(app) as url:
        opened = [post_json(url + "/reset")[0] for _ in range(40)]
        assert opened == [200] * 40


def test_a_public_server_caps_each_client_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.delenv("MAX_SESSIONS_PER_CLIENT", raising=False)
    local = load_settings(environ={}).values
    assert local.sessions_per_client(100, environ={}) is None
    with_auth = load_settings(environ={"OPENENV_API_KEY": "k"}).values
    assert with_auth.sessions_per_client(100, environ={}) == 16
    assert with_auth.sessions_per_client(4, environ={}) == 2
    assert local.sessions_per_client(100, environ={"SPACE_ID": "me/env"}) == 16
    unset = load_settings(environ={"OPENENV_API_KEY": "k", "MAX_SESSIONS_PER_CLIENT": "0"}).values
    assert unset.sessions_per_client(100, environ={}) is None  # 0: the operator turned it off
    monkeypatch.setenv("SPACE_ID", "me/env")
    app = create_app(tracking_env(Tracker()), EchoAction, EchoObservation, max_concurrent_envs=4)
    with running_server(app) as url:
        statuses = [post_json(url + "/reset")[0] for _ in range(3)]
        assert statuses == [200, 200, 429]


def test_a_full_server_says_when_to_retry_a_reset() -> None:
    app = create_app(tracking_env(Tracker()), EchoAction, EchoObservation, max_concurrent_envs=1)
    with running_server(app) as url:
        assert post_json(url + "/reset")[0] == 200
        refused = httpx.post(url + "/reset")
        assert refused.status_code == 503 and refused.json()["code"] == "CAPACITY_REACHED"
        assert refused.headers["Retry-After"] == "1"  # like a refused WebSocket handshake
        full = httpx.get(url + "/ready")
        assert full.status_code == 503 and full.json()["status"] == "full"
        assert httpx.get(url + "/health").status_code == 200  # liveness is not readiness
