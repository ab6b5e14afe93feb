"""``openenv top`` against a server behind an API key: the key reaches /metrics in the
Authorization header and never appears in what top prints, whichever way it was given."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from openenv_cli.main import app as cli
from openenv_cli.main import main
from openenv_runtime.testing import free_port
from tests.support.servers import spawn_server, stop_process

KEY = "top-Key-5f1e9c"
runner = CliRunner()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = free_port()
    process = spawn_server("tests.fixtures.echo_app:app", port, env={"OPENENV_API_KEY": KEY})
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(process)


def run(args: list[str], key: str | None) -> tuple[int, str]:
    env = {"OPENENV_API_KEY": key} if key is not None else {"OPENENV_API_KEY": ""}
    result = runner.invoke(cli, ["top", *args, "--once", "--interval", "0.1"], env=env)
    return result.exit_code, result.output


@pytest.mark.parametrize("as_json", [True, False])
def test_the_key_is_sent_and_never_shown(server: str, as_json: bool) -> None:
    code, output = run([server, *(["--json"] if as_json else [])], KEY)
    assert code == 0, output
    assert KEY not in output
    if as_json:
        (view,) = json.loads(output)
        assert "error" not in view and view["steps"] == 0 and view["capacity"] > 0


def test_the_token_flag_is_not_shown_either(server: str) -> None:
    code, output = run([server, "--json", "--token", KEY], None)
    assert code == 0 and KEY not in output
    assert "error" not in json.loads(output)[0]


@pytest.mark.parametrize("given", [None, "wrong-Key-0000"])
def test_a_missing_or_wrong_key_is_an_error_row_naming_the_variable(
    server: str, given: str | None
) -> None:
    code, output = run([server, "--json"], given)
    assert code == 0, output
    (view,) = json.loads(output)
    assert set(view) == {"url", "error"} and "OPENENV_API_KEY" in view["error"]
    assert KEY not in output and (given is None or given not in output)


def test_a_password_in_a_url_is_refused_unshown(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["top", "http://admin:hunter2-secret@127.0.0.1:9/", "--once"])
    assert exited.value.code != 0
    shown = capsys.readouterr()
    assert "OPENENV_API_KEY" in shown.err and "hunter2-secret" not in shown.out + shown.err


class Recorder(BaseHTTPRequestHandler):
    """Answers /health and /metrics with a redirect to ``self.server.target`` and records the
    Authorization header of every request it gets."""

    def do_GET(self) -> None:
        seen: list[str | None] = self.server.seen  # type: ignore[attr-defined]
        seen.append(self.headers.get("Authorization"))
        target: str | None = self.server.target  # type: ignore[attr-defined]
        if target is None:
            self.send_response(404)
        else:
            self.send_response(302)
            self.send_header("Location", target + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def recorder(target: str | None) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.seen, server.target = [], target  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_the_key_does_not_follow_a_redirect() -> None:
    elsewhere = recorder(None)  # "another host": it must never see the key
    redirecting = recorder(f"http://127.0.0.1:{elsewhere.server_port}")
    try:
        code, output = run([f"127.0.0.1:{redirecting.server_port}", "--json"], KEY)
    finally:
        for server in (redirecting, elsewhere):
            server.shutdown()
            server.server_close()
    assert code == 0, output
    (view,) = json.loads(output)
    assert "error" in view and KEY not in output
    assert set(redirecting.seen) == {f"Bearer {KEY}"}  # type: ignore[attr-defined]
    assert not any(elsewhere.seen)  # type: ignore[attr-defined]
