"""`openenv validate --url`'s reads of a server: the token never follows a redirect elsewhere."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from openenv_cli.validation.wire import get_json
from tests.support.http_server import QuietHandler, base_url, serving

seen: list[tuple[str, str | None]] = []


class Redirecting(QuietHandler):
    def do_GET(self) -> None:
        seen.append((self.path, self.headers.get("Authorization")))
        if self.path == "/health":  # to another host name: the token must not go along
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{self.server.server_port}/elsewhere")
            self.end_headers()
            return
        self.answer(200, b'{"status": "healthy"}')


@pytest.fixture
def base() -> Iterator[str]:
    with serving(Redirecting) as server:
        yield base_url(server)


def test_the_token_is_not_sent_on_to_where_a_redirect_points(base: str) -> None:
    seen.clear()
    status, body = get_json(base, "/health", 5.0, token="sekrit-token")
    assert (status, body) == (200, {"status": "healthy"})
    assert seen == [("/health", "Bearer sekrit-token"), ("/elsewhere", None)]


def test_an_unreachable_server_is_an_os_error() -> None:
    with pytest.raises(OSError, match="failed"):
        get_json("http://127.0.0.1:9", "/health", 2.0)
