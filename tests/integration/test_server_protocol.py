"""The /ws protocol against a real uvicorn server: transcript, bad input, errors.

The tests of ``server/ws/endpoint.py`` (the endpoint is only meaningful on a real connection).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from openenv_runtime import create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import running_server
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation
from tests.fixtures.tracking import Tracker, tracking_env
from tests.support.servers import active_sessions, wait_until


@pytest.fixture(scope="module")
def tracker() -> Tracker:
    return Tracker()


@pytest.fixture(scope="module")
def server(tracker: Tracker) -> Iterator[str]:
    app = create_app(
        tracking_env(tracker),
        EchoAction,
        EchoObservation,
        settings=ServerSettings(max_message_bytes=4096, web_interface=False),
    )
    with running_server(app) as url:
        yield url


def ws(base: str) -> ClientConnection:
    return connect(base.replace("http", "ws") + "/ws", open_timeout=5)


def ask(conn: ClientConnection, frame: str | bytes | dict) -> dict:
    conn.send(json.dumps(frame) if isinstance(frame, dict) else frame)
    return json.loads(conn.recv(timeout=5))


def test_transcript_matches_the_protocol(server: str) -> None:
    with ws(server) as conn:
        assert ask(conn, {"type": "reset", "data": {}}) == {
            "type": "observation",
            "data": {
                "observation": {"metadata": {}, "echoed_message": "ready", "message_length": 0},
                "reward": 0.0,
                "done": False,
            },
        }
        reply = ask(conn, {"type": "step", "data": {"message": "Hello"}})
        assert reply["type"] == "observation"
        assert reply["data"]["observation"]["echoed_message"] == "Hello"
        assert reply["data"]["reward"] == pytest.approx(0.5)
        assert ask(conn, {"type": "state"})["data"]["step_count"] == 1
        conn.send(json.dumps({"type": "close"}))
        with pytest.raises(ConnectionClosed) as info:
            conn.recv(timeout=5)
        assert info.value.rcvd is not None and info.value.rcvd.code == 1000


def test_reset_passes_episode_id(server: str) -> None:
    with ws(server) as conn:
        ask(conn, {"type": "reset", "data": {"episode_id": "mine", "seed": 3}})
        assert ask(conn, {"type": "state"})["data"]["episode_id"] == "mine"


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("{not json", "INVALID_JSON"),
        (b"\xff\xfe\x00binary", "INVALID_JSON"),
        ("[1, 2, 3]", "VALIDATION_ERROR"),
        ('"just a string"', "VALIDATION_ERROR"),
        ("42", "VALIDATION_ERROR"),
        ('{"type": "dance"}', "UNKNOWN_TYPE"),
        ('{"data": {}}', "UNKNOWN_TYPE"),
        ('{"type": "step", "data": {"message": 5}}', "VALIDATION_ERROR"),
        ('{"type": "step", "data": {}}', "VALIDATION_ERROR"),
        ('{"type": "step", "data": {"message": "hi", "bogus": 1}}', "VALIDATION_ERROR"),
        ('{"type": "step"}', "VALIDATION_ERROR"),
        ('{"type": "reset", "data": [1]}', "VALIDATION_ERROR"),
        ('{"type": "step", "data": {"message": "boom"}}', "EXECUTION_ERROR"),
        ('{"type": "step", "data": {"message": "wrong-type"}}', "EXECUTION_ERROR"),
    ],
)
def test_bad_input_gets_its_code_and_the_session_lives_on(
    server: str, frame: str | bytes, code: str
) -> None:
    with ws(server) as conn:
        ask(conn, {"type": "reset"})
        reply = ask(conn, frame)
        assert reply["type"] == "error"
        assert reply["data"]["code"] == code
        assert "Traceback" not in reply["data"]["message"]
        # the same session still works, with its state intact
        assert ask(conn, {"type": "step", "data": {"message": "ok"}})["type"] == "observation"


def test_validation_error_lists_the_field(server: str) -> None:
    with ws(server) as conn:
        reply = ask(conn, {"type": "step", "data": {"message": 5}})
        assert reply["data"]["errors"][0]["loc"] == ["message"]
        assert reply["data"]["message"].startswith("Invalid action: message: ")


def test_wrong_return_type_says_what_to_return(server: str) -> None:
    with ws(server) as conn:
        reply = ask(conn, {"type": "step", "data": {"message": "wrong-type"}})
        assert "returned dict" in reply["data"]["message"]
        assert "EchoObservation(" in reply["data"]["message"]


def test_binary_frame_with_json_is_understood(server: str) -> None:
    with ws(server) as conn:
        assert ask(conn, b'{"type": "reset"}')["type"] == "observation"


def test_no_leaks_after_bad_input(server: str, tracker: Tracker) -> None:
    assert wait_until(lambda: active_sessions(server) == 0)
    assert wait_until(lambda: tracker.closed_total() == tracker.created)
    assert tracker.closed_more_than_once() == []


def test_factory_error() -> None:
    def broken_factory() -> EchoEnvironment:
        raise RuntimeError("no GPU here")

    app = create_app(
        broken_factory, EchoAction, EchoObservation, settings=ServerSettings(web_interface=False)
    )
    with running_server(app) as url, ws(url) as conn:
        reply = json.loads(conn.recv(timeout=5))
        assert reply["data"]["code"] == "FACTORY_ERROR"
        assert "no GPU here" in reply["data"]["message"]
        with pytest.raises(ConnectionClosed) as info:
            conn.recv(timeout=5)
        assert info.value.rcvd is not None and info.value.rcvd.code == 1011
        assert wait_until(lambda: active_sessions(url) == 0)
