"""``openenv bench``'s access token: where it comes from, where it goes, and where it never shows."""

from __future__ import annotations

import pickle
from dataclasses import asdict

import pytest

from openenv_cli.bench import auth
from openenv_cli.bench.http_sessions import HttpConnection
from openenv_cli.bench.outcomes import describe_failure
from openenv_cli.bench.runner import BenchSettings
from openenv_cli.bench.target import Target
from openenv_cli.bench.wsclient import ConnectionLost
from openenv_cli.errors import UsageError

SECRET = "unit-secret-7f3a"


class TestResolve:
    def test_flag_wins_over_the_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("OPENENV_API_KEY", "from-env")
        resolved = auth.resolve_api_key(SECRET)
        assert (resolved.value, resolved.origin) == (SECRET, "--token")

    def test_environment_variable(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("OPENENV_API_KEY", SECRET)
        resolved = auth.resolve_api_key(None)
        assert (resolved.value, resolved.origin) == (SECRET, "OPENENV_API_KEY")

    @pytest.mark.parametrize("value", [None, "", "   "])
    def test_none_by_default(self, monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
        if value is None:
            monkeypatch.delenv("OPENENV_API_KEY", raising=False)
        else:
            monkeypatch.setenv("OPENENV_API_KEY", value)
        assert auth.resolve_api_key(None).value is None
        assert auth.resolve_api_key("").value is None


@pytest.mark.parametrize("bad", [SECRET + "\n", f"{SECRET}\r\nX-Evil: 1", "tok en", "clé"])
def test_a_token_a_header_cannot_carry_is_refused_without_echo(
    monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv("OPENENV_API_KEY", bad)
    with pytest.raises(UsageError) as caught:
        auth.resolve_api_key(None)
    assert "OPENENV_API_KEY" in str(caught.value) and bad not in str(caught.value)


def test_headers() -> None:
    assert auth.auth_headers(SECRET) == {"Authorization": f"Bearer {SECRET}"}
    assert auth.auth_headers(None) == {} and auth.auth_headers("") == {}


@pytest.mark.parametrize(
    ("label", "refused"),
    [
        ("connect: HTTP 403", True),
        ("connect: HTTP 401", True),
        ("reset: HTTP 401", True),
        ("step: HTTP 403", True),
        ("connect: connection closed (1008)", True),
        ("connect: HTTP 404", False),
        ("reset: HTTP 429", False),
        ("step: error INVALID_ACTION", False),
        ("connect: connection closed (1013)", False),
        ("connect: timeout", False),
    ],
)
def test_auth_refusal_labels(label: str, refused: bool) -> None:
    assert auth.is_auth_refusal(label) is refused


def test_mostly_unauthorized_needs_half() -> None:
    assert auth.mostly_unauthorized({"connect: HTTP 403": 4}, 8) == "connect: HTTP 403"
    assert auth.mostly_unauthorized({"connect: HTTP 403": 3}, 8) is None
    assert auth.mostly_unauthorized({"reset: HTTP 401": 5, "connect: timeout": 3}, 8) == (
        "reset: HTTP 401"
    )
    assert auth.mostly_unauthorized({"step: error X": 8}, 8) is None


class TestUnauthorized:
    def test_without_a_token_it_says_to_set_the_variable(self) -> None:
        error = auth.Unauthorized("http://h:1", "HTTP 401 on /schema", None)
        assert "requires an access token" in error.message and "none was given" in error.message
        assert error.hint is not None and "export OPENENV_API_KEY=" in error.hint

    def test_a_refused_token_names_its_source_never_its_value(self) -> None:
        error = auth.Unauthorized("http://h:1", "connect: HTTP 403", "OPENENV_API_KEY")
        assert "refused the token from OPENENV_API_KEY" in str(error)
        assert SECRET not in str(error)


class TestTarget:
    def test_carries_the_token_hidden_from_repr(self) -> None:
        target = Target.parse("http://127.0.0.1:8000", token=SECRET)
        assert target.token == SECRET
        assert SECRET not in repr(target)
        # the worker processes get it inside the pickled target, over their socket pair
        assert pickle.loads(pickle.dumps(target)).token == SECRET

    def test_an_empty_token_is_none(self) -> None:
        assert Target.parse("http://127.0.0.1:8000", token="").token is None

    @pytest.mark.parametrize(
        "url",
        [f"http://user:{SECRET}@127.0.0.1:8000", f"http://127.0.0.1:8000?access_token={SECRET}"],
    )
    def test_credentials_in_the_url_are_refused_without_echo(self, url: str) -> None:
        with pytest.raises(ValueError) as caught:
            Target.parse(url)
        assert SECRET not in str(caught.value) and "OPENENV_API_KEY" in str(caught.value)


def test_settings_hide_the_token() -> None:
    settings = BenchSettings(url="http://127.0.0.1:8000", token=SECRET)
    assert SECRET not in repr(settings)
    assert settings.target().token == SECRET
    assert asdict(settings)["token"] == SECRET  # run_bench drops it from what it records


def test_http_connection_sends_the_header() -> None:
    connection = HttpConnection(None, None, "h:1", SECRET)  # type: ignore[arg-type]
    assert ("Authorization", f"Bearer {SECRET}") in connection.headers
    plain = HttpConnection(None, None, "h:1")  # type: ignore[arg-type]
    assert all(name != "Authorization" for name, _ in plain.headers)


def test_lean_close_code_is_labelled() -> None:
    assert describe_failure(ConnectionLost("x", 1008)) == "connection closed (1008)"
    assert describe_failure(ConnectionLost("x")) == "connection lost"
