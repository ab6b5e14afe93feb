"""Vector sessions' steps (server/ws/vector.py) are checked, run and counted by the server's one
step function, under their own labels: ``openenv_steps_total{transport="vector"}``."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient
from starlette.testclient import WebSocketTestSession

from openenv_runtime import create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.server.metrics import STEP_LABELS
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation


def ask(ws: WebSocketTestSession, message: dict[str, Any]) -> dict[str, Any]:
    ws.send_text(json.dumps(message))
    reply: dict[str, Any] = json.loads(ws.receive_text())
    return reply


def counted(app: Any) -> dict[tuple[str, str], int]:
    return dict(zip(STEP_LABELS, app.state.openenv_sessions.tally.steps, strict=True))


def test_vector_steps_count_as_vector_steps_valid_and_invalid() -> None:
    app = create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        settings=ServerSettings(max_concurrent_envs=4, max_vector_envs=2),
    )
    with (
        TestClient(app) as client,
        client.websocket_connect("/ws", headers={"X-OpenEnv-Vector": "2"}) as ws,
    ):
        ask(ws, {"type": "reset", "data": {"envs": [{}, {}]}})
        for _ in range(3):
            stepped = ask(ws, {"type": "step", "data": {"actions": [{"message": "hi"}, None]}})
            assert stepped["type"] == "observations"
        refused = ask(ws, {"type": "step", "data": {"actions": [{"message": "hi"}, {}]}})
        assert refused["type"] == "error" and "actions[1]" in refused["data"]["message"]
        failed = ask(ws, {"type": "step", "data": {"actions": [None, {"message": "boom"}]}})
        assert failed["data"]["results"][1]["type"] == "error"
    steps = counted(app)
    assert steps[("vector", "ok")] == 3
    assert steps[("vector", "invalid")] == 1
    assert steps[("vector", "error")] == 1
    assert steps[("ws", "invalid")] == 0 and steps[("ws", "ok")] == 0


def test_with_metrics_off_no_step_is_counted_on_any_way_in() -> None:
    app = create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        settings=ServerSettings(max_concurrent_envs=4, max_vector_envs=2, metrics=False),
    )
    with TestClient(app) as client:
        with client.websocket_connect("/ws", headers={"X-OpenEnv-Vector": "2"}) as ws:
            ask(ws, {"type": "reset", "data": {"envs": [{}, {}]}})
            ask(ws, {"type": "step", "data": {"actions": [{"message": "hi"}, {"message": "x"}]}})
        sid = client.post("/reset", json={}).json()["session_id"]
        step = client.post("/step", json={"session_id": sid, "action": {"message": "hi"}})
        assert step.status_code == 200
    assert not any(counted(app).values())
