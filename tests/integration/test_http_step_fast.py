"""The raw ``POST /step`` handler answers exactly as the framework route did, checks included."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from openenv_runtime import create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import running_server
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation
from tests.support.servers import post_json

pytestmark = pytest.mark.integration


def request(
    url: str,
    body: bytes,
    headers: dict[str, str] | None = None,
    path: str = "/step",
    chunked: bool = False,
) -> tuple[int, Any]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        if chunked:
            conn.putrequest("POST", path)
            for name, value in (headers or {}).items():
                conn.putheader(name, value)
            conn.putheader("Transfer-Encoding", "chunked")
            conn.endheaders()
            for start in range(0, len(body), 1000):
                piece = body[start : start + 1000]
                conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            conn.send(b"0\r\n\r\n")
        else:
            conn.request("POST", path, body=body, headers=headers or {})
        response = conn.getresponse()
        raw = response.read()
        try:
            return response.status, json.loads(raw)
        except ValueError:
            return response.status, raw
    finally:
        conn.close()


JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    app = create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        settings=ServerSettings(max_message_bytes=4096, web_interface=False),
    )
    with running_server(app) as url:
        yield url


def new_session(url: str) -> str:
    sid: str = post_json(url + "/reset")[1]["session_id"]
    return sid


def test_a_step_answers_the_route_s_fields_in_order(server: str) -> None:
    sid = new_session(server)
    status, raw = request(
        server, json.dumps({"action": {"message": "héllo"}, "session_id": sid}).encode(), JSON
    )
    assert status == 200
    # the response model's order; metadata beside the observation as the route writes it
    assert list(raw) == ["observation", "reward", "done", "session_id", "metadata"]
    assert raw["metadata"] == raw["observation"]["metadata"] != {}
    assert raw["observation"]["echoed_message"] == "héllo"
    assert raw["reward"] == pytest.approx(0.5) and raw["done"] is False
    assert raw["session_id"] == sid


@pytest.mark.parametrize("where", ["body", "query", "header"])
def test_the_session_may_be_named_anywhere_the_route_accepts(server: str, where: str) -> None:
    sid = new_session(server)
    body: dict[str, Any] = {"action": {"message": "x"}}
    headers = dict(JSON)
    path = "/step"
    if where == "body":
        body["session_id"] = sid
    elif where == "query":
        path = f"/step?other=1&session_id={sid}"
    else:
        headers["X-Session-Id"] = sid
    status, raw = request(server, json.dumps(body).encode(), headers, path)
    assert status == 200 and raw["session_id"] == sid


def test_no_session_and_an_unknown_one(server: str) -> None:
    status, raw = request(server, b'{"action": {"message": "x"}}', JSON)
    assert status == 400 and raw["code"] == "SESSION_ERROR" and "POST /reset" in raw["detail"]
    status, raw = request(server, b'{"action": {"message": "x"}, "session_id": "nope"}', JSON)
    assert status == 404 and raw["code"] == "SESSION_ERROR"


def test_invalid_actions_are_refused_with_the_route_s_errors(server: str) -> None:
    sid = new_session(server)
    status, raw = request(
        server, json.dumps({"action": {"message": 1}, "session_id": sid}).encode(), JSON
    )
    assert status == 422 and raw["code"] == "VALIDATION_ERROR" and raw["error_count"] == 1
    many = {f"k{i}": i for i in range(200)}
    status, raw = request(server, json.dumps({"action": many, "session_id": sid}).encode(), JSON)
    assert status == 422 and "200 fields" in raw["detail"]
    status, raw = request(
        server, json.dumps({"action": {"message": "boom"}, "session_id": sid}).encode(), JSON
    )
    assert status == 500 and raw["code"] == "EXECUTION_ERROR"


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (b"not json", JSON),  # the framework's JSON decode error
        (b'{"action": "text"}', JSON),  # action is not an object
        (b'["a list"]', JSON),
        (b'{"action": {"message": "x"}, "session_id": 5}', JSON),
        (b'{"action": {"message": "x"}}', {"Content-Type": "text/plain"}),
    ],
)
def test_unusual_requests_get_the_framework_s_answer(
    server: str, body: bytes, headers: dict[str, str]
) -> None:
    status, raw = request(server, body, headers)
    assert status == 422, raw
    assert isinstance(raw, dict) and isinstance(raw["detail"], list)  # FastAPI's own format


@pytest.mark.parametrize("chunked", [False, True])
def test_bodies_over_the_limit_get_413(server: str, chunked: bool) -> None:
    big = json.dumps({"action": {"message": "x" * 6000}, "session_id": "s"}).encode()
    status, raw = request(server, big, JSON, chunked=chunked)
    assert status == 413 and "4096 bytes" in raw["detail"]


def test_the_token_is_required_on_the_raw_route() -> None:
    app = create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        settings=ServerSettings(api_key="s3cret", web_interface=False),
    )
    with running_server(app) as url:
        status, _ = request(url, b'{"action": {"message": "x"}, "session_id": "s"}', JSON)
        assert status == 401
        auth = {**JSON, "Authorization": "Bearer s3cret"}
        status, raw = request(url, b"{}", auth, path="/reset")
        sid = raw["session_id"]
        body = json.dumps({"action": {"message": "ok"}, "session_id": sid}).encode()
        assert request(url, body, auth)[0] == 200
        assert request(url, body, {**JSON, "Authorization": "Bearer wrong"})[0] == 401
