"""The server side of the resume handshake: header parsing and token checks."""

from __future__ import annotations

from openenv_runtime.server.sessions.resume import ResumeState, accept_headers, handshake


def scope(*headers: tuple[bytes, bytes]) -> dict[str, object]:
    return {"headers": list(headers)}


def test_a_client_opts_in_with_a_well_formed_key() -> None:
    assert handshake(scope()) == (None, None)
    assert handshake(scope((b"x-openenv-session", b"a" * 22))) == (b"a" * 22, None)
    for bad in (b"short", b"a" * 65, b"a" * 21 + b"/", b"a" * 21 + b" x"):
        assert handshake(scope((b"x-openenv-session", bad)))[0] is None


def test_tokens_are_random_secret_and_compared_whole() -> None:
    first, second = ResumeState(), ResumeState()
    assert first.token != second.token and len(first.token) >= 43
    assert first.token_matches(first.token)
    assert not first.token_matches(first.token[:-1])
    assert not first.token_matches(second.token)
    assert "token" not in repr(first)


def test_accept_headers_carry_id_token_and_grace() -> None:
    state = ResumeState()
    headers = dict(accept_headers("sid" * 8, state, 30.0))
    assert headers == {
        b"x-openenv-session": b"sid" * 8,
        b"x-openenv-resume-token": state.token,
        b"x-openenv-resume-grace": b"30",
    }
