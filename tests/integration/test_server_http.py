"""HTTP /reset, /step, /state, /close keep real state; auth protects every route but /health."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from openenv_runtime import EnvClient, EnvError, State, create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.server.guards.auth import bearer_subprotocol
from openenv_runtime.testing import running_server
from tests.fixtures.echo import EchoAction, EchoObservation
from tests.fixtures.tracking import Tracker, tracking_env
from tests.support.servers import active_sessions, get_json, post_json, wait_until


class Echo(EnvClient[EchoAction, EchoObservation, State]):
    pass


@pytest.fixture()
def tracker() -> Tracker:
    return Tracker()


@pytest.fixture()
def server(tracker: Tracker) -> Iterator[str]:
    app = create_app(
        tracking_env(tracker),
        EchoAction,
        EchoObservation,
        max_concurrent_envs=2,
        settings=ServerSettings(session_timeout=1.0, web_interface=False),
    )
    with running_server(app) as url:
        yield url


def test_http_session_keeps_state(server: str) -> None:
    status, body = post_json(server + "/reset", {"episode_id": "h1"})
    assert status == 200 and body["observation"]["echoed_message"] == "ready"
    sid = body["session_id"]
    for message in ("a", "bcd"):
        status, body = post_json(
            server + "/step", {"action": {"message": message}, "session_id": sid}
        )
        assert status == 200
    assert body["reward"] == pytest.approx(0.3) and body["observation"]["message_length"] == 3
    status, state = get_json(server + f"/state?session_id={sid}")
    assert state == {"episode_id": "h1", "step_count": 2}
    # the header works as well as the body field
    status, state = get_json(server + "/state", headers={"X-Session-Id": sid})
    assert state["step_count"] == 2
    assert post_json(server + "/close", {"session_id": sid})[0] == 200
    assert active_sessions(server) == 0


def test_step_without_session_says_to_reset_first(server: str) -> None:
    status, body = post_json(server + "/step", {"action": {"message": "x"}})
    assert status == 400 and "POST /reset" in body["detail"] and "/ws" in body["detail"]
    status, body = get_json(server + "/state")
    assert status == 400
    status, body = post_json(server + "/step", {"action": {"message": "x"}, "session_id": "nope"})
    assert status == 404 and "POST /reset" in body["detail"]


def test_http_errors(server: str) -> None:
    sid = post_json(server + "/reset")[1]["session_id"]
    status, body = post_json(server + "/step", {"action": {"message": 1}, "session_id": sid})
    assert status == 422 and body["code"] == "VALIDATION_ERROR"
    status, body = post_json(server + "/step", {"action": {"message": "boom"}, "session_id": sid})
    assert status == 500 and body["code"] == "EXECUTION_ERROR" and "bad move" in body["detail"]


def test_http_sessions_count_against_capacity_and_expire(server: str, tracker: Tracker) -> None:
    post_json(server + "/reset")
    post_json(server + "/reset")
    status, body = post_json(server + "/reset")
    assert status == 503 and body["code"] == "CAPACITY_REACHED"
    with connect(server.replace("http", "ws") + "/ws") as conn:
        assert json.loads(conn.recv(timeout=5))["data"]["code"] == "CAPACITY_REACHED"
    assert wait_until(lambda: active_sessions(server) == 0, timeout=10)  # idle timeout 1 s
    # the slot is freed first, then the environment closed: wait for both closes
    assert wait_until(lambda: tracker.closed_total() == 2)


def test_metadata_schema_health(server: str) -> None:
    status, schema = get_json(server + "/schema")
    assert status == 200
    assert set(schema) == {"action", "observation", "reset_observation", "state"}
    assert "message" in schema["action"]["properties"]
    status, meta = get_json(server + "/metadata")
    assert status == 200
    assert {
        "name",
        "description",
        "version",
        "readme_content",
        "author",
        "documentation_url",
    } <= set(meta)
    _, health = get_json(server + "/health")
    assert (
        health["status"] == "healthy"
        and health["max_sessions"] == 2
        and health["auth_required"] is False
    )
    # a class without a docstring of its own does not inherit Environment's as its description
    assert meta["description"] == "The TrackingEnvironment environment"


def test_token_protects_everything_but_health() -> None:
    tracker = Tracker()
    app = create_app(
        tracking_env(tracker),
        EchoAction,
        EchoObservation,
        settings=ServerSettings(api_key="s3cret", web_interface=False),
    )
    with running_server(app) as url:
        status, health = get_json(url + "/health")
        assert status == 200 and health["auth_required"] is True
        assert get_json(url + "/schema")[0] == 401
        assert post_json(url + "/reset")[0] == 401
        assert get_json(url + "/schema", headers={"Authorization": "Bearer s3cret"})[0] == 200
        with pytest.raises(InvalidStatus):
            connect(url.replace("http", "ws") + "/ws", open_timeout=5)
        assert tracker.created == 0  # refused before any environment was made
        with pytest.raises(EnvError, match="403"):
            Echo(url).sync().reset()
        with Echo(url, token="s3cret").sync() as env:
            assert env.step(EchoAction(message="hi")).reward == pytest.approx(0.2)
        offered = ["openenv", bearer_subprotocol("s3cret")]
        with connect(url.replace("http", "ws") + "/ws", subprotocols=offered) as conn:  # type: ignore[arg-type]
            assert conn.subprotocol == "openenv"  # the token is never echoed back
            conn.send('{"type":"reset"}')
            assert json.loads(conn.recv(timeout=5))["type"] == "observation"
