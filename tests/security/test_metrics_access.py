"""``/metrics`` with auth on: behind the API key, unless the operator made it public."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from openenv_runtime import create_app
from openenv_runtime.server import ServerSettings
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation

TOKEN = "metrics-Token"


@pytest.mark.parametrize("web", [True, False])
def test_metrics_need_the_key_when_auth_is_on(web: bool) -> None:
    app = create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        settings=ServerSettings(api_key=TOKEN, web_interface=web),
    )
    with TestClient(app) as client:
        refused = client.get("/metrics")
        assert refused.status_code == 401
        assert "openenv_" not in refused.text
        allowed = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert allowed.status_code == 200
        assert "openenv_sessions_opened_total" in allowed.text or "openenv_steps" in allowed.text


def test_public_metrics_opens_only_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_PUBLIC_METRICS", "1")
    app = create_app(
        EchoEnvironment, EchoAction, EchoObservation, settings=ServerSettings(api_key=TOKEN)
    )
    with TestClient(app) as client:
        assert client.get("/metrics").status_code == 200
        assert client.get("/metrics/").status_code in (401, 404)  # the exact path only
        assert client.get("/schema").status_code == 401


def test_metrics_off_serves_no_route(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_METRICS", "0")
    app = create_app(EchoEnvironment, EchoAction, EchoObservation)
    with TestClient(app) as client:
        assert client.get("/metrics").status_code == 404
