"""`openenv validate --url`'s reads of a server: the token never follows a redirect elsewhere."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from openenv_cli.validation.wire import get_json

seen: list[tuple[str, str | None]] = []


class Redirecting(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        seen.append((self.path, self.headers.get("Authorization")))
        if self.path == "/health":  # to another host name: the token must not go along
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{self.server.server_port}/elsewhere")
            self.end_headers()
            return
        body = b'{"status": "healthy"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def base() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_the_token_is_not_sent_on_to_where_a_redirect_points(base: str) -> None:
    seen.clear()
    status, body = get_json(base, "/health", 5.0, token="sekrit-token")
    assert (status, body) == (200, {"status": "healthy"})
    assert seen == [("/health", "Bearer sekrit-token"), ("/elsewhere", None)]


def test_an_unreachable_server_is_an_os_error() -> None:
    with pytest.raises(OSError, match="failed"):
        get_json("http://127.0.0.1:9", "/health", 2.0)
