"""A session id is not a credential: only a session's owner reaches it, and no log names it."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from openenv_runtime import create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import running_server
from tests.fixtures.mcp_echo import ToolEchoEnvironment
from tests.support.servers import active_sessions, get_json, post_json

pytestmark = pytest.mark.integration  # real servers on real sockets

KEY = "victim-session-key-0001"  # what a resuming client sends, and a load balancer sees


def rpc(method: str, rid: int = 1, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def ask(conn: ClientConnection, frame: dict[str, Any]) -> dict[str, Any]:
    conn.send(json.dumps(frame))
    return dict(json.loads(conn.recv(timeout=10)))


def victim(url: str) -> ClientConnection:
    conn = connect(url.replace("http", "ws") + "/ws", additional_headers={"X-OpenEnv-Session": KEY})
    assert ask(conn, {"type": "reset"})["type"] == "observation"
    return conn


def test_post_mcp_cannot_reach_a_websocket_session_by_its_id() -> None:
    app = create_app(ToolEchoEnvironment, None, None, max_concurrent_envs=4)
    with running_server(app) as url, victim(url) as mine:
        call = rpc("tools/call", name="echo", arguments={"message": "pwned"}, session_id=KEY)
        _status, reply = post_json(url + "/mcp", call)
        assert "error" in reply and "Unknown session_id" in reply["error"]["message"], reply
        assert KEY not in json.dumps(reply)  # not even echoed back
        assert ask(mine, {"type": "state"})["type"] == "state"  # the owner's session is intact


def test_session_close_from_another_socket_is_refused() -> None:
    app = create_app(ToolEchoEnvironment, None, None, max_concurrent_envs=4)
    with running_server(app) as url, victim(url) as mine:
        with connect(url.replace("http", "ws") + "/ws") as attacker:
            ask(attacker, {"type": "reset"})
            frame = {"type": "mcp", "data": rpc("openenv/session/close", session_id=KEY)}
            reply = ask(attacker, frame)["data"]
            assert "error" in reply and "Unknown session_id" in reply["error"]["message"]
        assert ask(mine, {"type": "state"})["type"] == "state"


def test_an_http_session_is_reached_only_with_the_secret_it_was_given() -> None:
    app = create_app(ToolEchoEnvironment, None, None, max_concurrent_envs=4)
    with running_server(app) as url:
        _, created = post_json(url + "/mcp", rpc("openenv/session/create"))
        secret = created["result"]["session_id"]
        assert len(secret) >= 43  # 32 random bytes: not guessable, not enumerable
        _, reply = post_json(
            url + "/mcp",
            rpc("tools/call", name="echo", arguments={"message": "hi"}, session_id=secret),
        )
        assert "result" in reply, reply
        for guess in (secret[:-1], secret[:12], "1", ""):
            _, reply = post_json(url + "/mcp", rpc("openenv/session/close", session_id=guess))
            assert "error" in reply
        _, reply = post_json(url + "/mcp", rpc("openenv/session/close", session_id=secret))
        assert reply["result"]["closed"] is True
        assert active_sessions(url) == 0


def test_an_http_session_cannot_be_stepped_through_a_websocket_id() -> None:
    app = create_app(ToolEchoEnvironment, None, None, max_concurrent_envs=4)
    with running_server(app) as url, victim(url):
        status, _body = get_json(url + f"/state?session_id={KEY}")
        assert status == 404
        with connect(url.replace("http", "ws") + f"/ws?session_id={KEY}") as conn:
            assert json.loads(conn.recv(timeout=10))["data"]["code"] == "SESSION_ERROR"


def test_session_ids_are_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    app = create_app(
        ToolEchoEnvironment,
        None,
        None,
        max_concurrent_envs=4,
        settings=ServerSettings(step_timeout=5),
    )
    ids: list[str] = []
    with running_server(app) as url:
        with victim(url) as conn:
            ask(conn, {"type": "step", "data": {"type": "list_tools"}})
        _, opened = post_json(url + "/reset")
        ids.append(opened["session_id"])
        post_json(url + "/close", {"session_id": ids[-1]})
        _, created = post_json(url + "/mcp", rpc("openenv/session/create"))
        ids.append(created["result"]["session_id"])
        post_json(url + "/mcp", rpc("openenv/session/close", session_id=ids[-1]))
        post_json(url + "/mcp", rpc("openenv/session/close", session_id=ids[-1]))  # unknown now
    text = "\n".join(r.getMessage() for r in caplog.records)
    for secret in (*ids, KEY):
        assert secret not in text


def test_a_wrong_resume_token_answers_like_an_unknown_session() -> None:
    app = create_app(ToolEchoEnvironment, None, None, max_concurrent_envs=4)
    with running_server(app) as url, victim(url) as mine:
        answers = []
        for session in (KEY, "no-such-session-key-0001"):  # a live session, then none
            headers = {"X-OpenEnv-Session": session, "X-OpenEnv-Resume-Token": "x" * 43}
            with pytest.raises(InvalidStatus) as refused:
                connect(url.replace("http", "ws") + "/ws", additional_headers=headers)
            response = refused.value.response
            answers.append(
                (response.status_code, response.headers["X-OpenEnv-Error"], response.body)
            )
        assert answers[0] == answers[1]
        assert ask(mine, {"type": "reset"})["type"] == "observation"  # still the owner's
