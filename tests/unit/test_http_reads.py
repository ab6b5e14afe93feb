"""The runtime's reads of /schema, /health, /metadata over plain HTTP, against a real socket.

Redirects and oversized answers: ``tests/security/test_http_reads.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from openenv_runtime.errors import EnvError
from openenv_runtime.http_reads import (
    http_base,
    read_answer,
    read_json,
    read_schema,
)
from tests.support.http_server import QuietHandler, base_url, serving

seen: list[tuple[str, str | None]] = []


class Handler(QuietHandler):
    def do_GET(self) -> None:
        seen.append((self.path, self.headers.get("Authorization")))
        if self.path == "/schema":
            self.answer(200, json.dumps({"action": {"type": "object"}}).encode())
        elif self.path == "/list":
            self.answer(200, b"[1, 2]")
        else:
            self.answer(404, b"{}")


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with serving(Handler) as server:
        yield base_url(server)


def test_the_schema_is_read_with_the_token(base: str) -> None:
    seen.clear()
    assert read_schema(base + "/", token="t0k") == {"action": {"type": "object"}}
    assert seen == [("/schema", "Bearer t0k")]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("ws://h:1/ws", "http://h:1"),
        ("wss://h/ws/", "https://h"),
        ("http://h:8000/", "http://h:8000"),
        ("https://h/prefix/ws", "https://h/prefix"),
    ],
)
def test_a_websocket_url_reads_beside_its_ws_path(given: str, expected: str) -> None:
    assert http_base(given) == expected


def test_a_proxy_from_the_environment_is_not_used_for_this_machine(
    base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # nothing listens there
    assert read_schema(base)["action"] == {"type": "object"}


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/missing", "answered 404"),
        ("/list", "not answer with a JSON object"),
    ],
)
def test_what_is_not_a_json_object_is_a_connection_error(base: str, path: str, says: str) -> None:
    with pytest.raises(EnvError, match=says) as caught:
        read_json(base, path)
    assert caught.value.code == "CONNECTION_ERROR"


def test_a_closed_port_is_a_connection_error() -> None:
    with pytest.raises(EnvError, match="failed"):
        read_schema("http://127.0.0.1:9", timeout=2)


def test_read_answer_gives_any_status_and_its_body(base: str) -> None:
    seen.clear()
    assert read_answer(base, "/schema", token="t0k") == (200, b'{"action": {"type": "object"}}')
    assert read_answer(base, "/missing") == (404, b"{}")  # a status, not an error
    assert seen == [("/schema", "Bearer t0k"), ("/missing", None)]
