"""A hostile or redirected server meets the runtime's one JSON reader (``http_reads``).

The reader carries a token to servers a user named; nothing it reads may send that token on
to another host, and no answer may grow the reader's memory past its bound.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from openenv_runtime.errors import EnvError
from openenv_runtime.http_reads import MAX_BODY_BYTES, read_answer, read_json
from tests.support.http_server import QuietHandler, base_url, serving

seen: list[tuple[str, str | None]] = []


class Hostile(QuietHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        seen.append((self.path, self.headers.get("Authorization")))
        if self.path == "/away/schema":  # a redirect to another host name of this machine
            self.send_response(302)
            port = self.headers["Host"].rsplit(":", 1)[1]
            self.send_header("Location", f"http://localhost:{port}/landed")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/landed":
            self.answer(200, b"{}")
        elif self.path == "/huge":
            self.answer(200, b"[" + b"0," * (MAX_BODY_BYTES // 2 + 8) + b"0]")
        elif self.path == "/endless":  # no length, chunks until the reader hangs up
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"0," * 32_768
            try:
                for _ in range(4 * MAX_BODY_BYTES // len(chunk)):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except OSError:
                return


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with serving(Hostile) as server:
        yield base_url(server)


def test_the_token_does_not_follow_a_redirect(base: str) -> None:
    seen.clear()
    read_json(base + "/away", "/schema", token="secret")
    assert seen == [("/away/schema", "Bearer secret"), ("/landed", None)]


@pytest.mark.parametrize("path", ["/huge", "/endless"])
def test_an_answer_over_the_bound_is_refused(base: str, path: str) -> None:
    with pytest.raises(EnvError, match=f"over {MAX_BODY_BYTES} bytes") as caught:
        read_answer(base, path)
    assert caught.value.code == "CONNECTION_ERROR"
