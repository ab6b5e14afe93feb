import logging

import pytest

from openenv_runtime.server.logs import RedactSecrets, redact


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ('127.0.0.1:1 - "GET /ws?access_token=abc123&x=1 HTTP/1.1" 101', "abc123"),
        ("GET /step?token=t0k3n", "t0k3n"),
        ("GET /x?a=1&api_key=k3y#frag", "k3y"),
        ("GET /x?API-KEY=k3y", "k3y"),
        ("< authorization: Bearer s3cret", "s3cret"),
        ("< sec-websocket-protocol: openenv, openenv.bearer.czNjcmV0", "czNjcmV0"),
    ],
)
def test_credentials_are_redacted(line: str, secret: str) -> None:
    assert secret not in redact(line) and "[redacted]" in redact(line)


def test_ordinary_queries_are_left_alone() -> None:
    assert redact("GET /state?max_tokens=5&seed=1") == "GET /state?max_tokens=5&seed=1"


def test_a_secret_split_over_arguments_is_caught() -> None:
    record = logging.LogRecord(
        "uvicorn.error", logging.DEBUG, "", 0, "< %s: %s", ("authorization", "Bearer s3cret"), None
    )
    RedactSecrets().filter(record)
    assert "s3cret" not in record.getMessage()
