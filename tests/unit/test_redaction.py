import logging

import pytest

from openenv_runtime.redaction import RedactSecrets, redact


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


@pytest.mark.parametrize(
    "line",
    [
        "GET /x?auth=S3CRET HTTP/1.1",
        "GET /x?key=S3CRET&y=1",
        "POST /login password=S3CRET",
        "GET /x?access%5Ftoken=S3CRET",
        "GET /x?api%2Dkey=S3CRET",
        "GET /state?session_id=S3CRET HTTP/1.1",
        "> X-OpenEnv-Resume-Token: S3CRET",
        "< X-Api-Key: S3CRET",
        "'headers': [(b'host', b'h'), (b'x-openenv-resume-token', b'S3CRET')]",
        "{'session_id': 'S3CRET', 'type': 'x'}",
        "GET /blob?sv=2024-05-04&sig=S3CRET%3D&se=2030 HTTP/1.1",
        "GET /x?X-Amz-Signature=S3CRET",
        "GET /x?jwt=S3CRET",
        "GET /x?hmac=S3CRET",
    ],
)
def test_every_spelling_of_a_secret_is_redacted(line: str) -> None:
    cleaned = redact(line)
    assert "S3CRET" not in cleaned and "[redacted]" in cleaned
    assert redact(cleaned) == cleaned  # a second filter on the way changes nothing
