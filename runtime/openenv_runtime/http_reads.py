"""Reads of a server's JSON endpoints (``/schema``, ``/health``, ``/metadata``) over plain HTTP.

The standard library's client: the runtime's base install has no HTTP client library, and
these are a few reads per session, off every hot path. A server on this machine is reached
directly (a proxy from the environment must not stand between), and the token is never sent
on to a host that a redirect names. Failures are ``EnvError`` with code ``CONNECTION_ERROR``
(the server could not be reached, or answered with an error status or no JSON object).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from http import HTTPStatus
from typing import Any

from .errors import EnvError

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})
MAX_BODY_BYTES = 16 << 20  # a schema with big enums is large; more is not an environment server

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_DEFAULT = urllib.request.build_opener()


def http_base(url: str) -> str:
    """``ws(s)://host/ws`` or ``http(s)://host/`` → ``http(s)://host`` (endpoints sit beside /ws)."""
    parts = urllib.parse.urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    path = parts.path.rstrip("/")
    if path.endswith("/ws"):
        path = path[: -len("/ws")]
    return urllib.parse.urlunsplit((scheme, parts.netloc, path, "", ""))


def read_answer(
    base_url: str, path: str, *, token: str | None = None, timeout: float = 30.0
) -> tuple[int, bytes]:
    """The status and body of ``GET base_url + path``, whatever the status (``/metrics``' text,
    a 401 or a 404 included); at most :data:`MAX_BODY_BYTES` read. Raises ``EnvError``
    ``CONNECTION_ERROR`` when the server cannot be reached or answers more than that."""
    url = http_base(base_url) + path
    request = urllib.request.Request(url)
    if token:
        request.add_unredirected_header("Authorization", f"Bearer {token}")
    host = urllib.parse.urlsplit(url).hostname or ""
    opener = _DIRECT if host in LOOPBACK_HOSTS else _DEFAULT
    try:
        with opener.open(request, timeout=timeout) as answer:
            status, body = answer.status, answer.read(MAX_BODY_BYTES + 1)
    except urllib.error.HTTPError as error:
        with error:
            status, body = error.code, error.read(MAX_BODY_BYTES + 1)
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise EnvError("CONNECTION_ERROR", f"GET {url} failed: {reason}") from None
    if len(body) > MAX_BODY_BYTES:
        raise EnvError("CONNECTION_ERROR", f"GET {url}: the answer is over {MAX_BODY_BYTES} bytes")
    return status, body


def read_json(
    base_url: str, path: str, *, token: str | None = None, timeout: float = 30.0
) -> dict[str, Any]:
    """The JSON object of ``GET base_url + path`` (``path`` like ``/schema``)."""
    status, body = read_answer(base_url, path, token=token, timeout=timeout)
    url = http_base(base_url) + path
    if not 200 <= status < 300:
        try:
            reason = " " + HTTPStatus(status).phrase
        except ValueError:  # a status the standard library does not name
            reason = ""
        raise EnvError("CONNECTION_ERROR", f"GET {url} answered {status}{reason}")
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise EnvError("CONNECTION_ERROR", f"GET {url} did not answer with a JSON object")
    return data


def read_schema(
    base_url: str, *, token: str | None = None, timeout: float = 30.0
) -> dict[str, Any]:
    """The server's ``/schema``: JSON schemas of its ``action``, ``observation`` and ``state``."""
    return read_json(base_url, "/schema", token=token, timeout=timeout)
