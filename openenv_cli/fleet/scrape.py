"""Read every replica's ``/health`` and ``/metrics``, all at once, each bounded in time and size.

A replica that cannot be read (down, refusing the key, answering something else) becomes an
error row, never an exception: one bad replica does not hide the others. The access token
travels only in the ``Authorization`` header; no error message repeats a header.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from openenv_cli.errors import UsageError
from openenv_cli.fleet.snapshot import Snapshot, down_view, from_health, from_metrics, replica_view

TIMEOUT = 5.0
"""Seconds one request to a replica may take before the replica shows as an error."""
MAX_BODY = 8 * 1024 * 1024
"""Bytes of one answer read at most (a server's /metrics is a few kB)."""
_AUTH = (401, 403)


class ScrapeError(Exception):
    """Why one replica could not be read (shown in its row, and as ``error`` in JSON)."""


def replica_url(text: str) -> str:
    """``text`` as a base URL: ``http://`` added when no scheme is given, no trailing slash.

    Raises :class:`UsageError` for another scheme, or a URL carrying a user or password (it
    would show in the view; the key goes in ``OPENENV_API_KEY``).
    """
    raw = text.strip()
    if "://" not in raw:
        raw = "http://" + raw
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"{text!r} is not a server URL.",
            hint="Write e.g. http://10.0.0.5:8000 or 10.0.0.5:8000.",
        )
    if parts.username or parts.password:
        raise UsageError(
            "A replica URL carries a user or password, which the view would show.",
            hint="Drop it from the URL and export OPENENV_API_KEY=<key> instead.",
        )
    return raw.rstrip("/")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as its status: urllib would send the Authorization header on to
    wherever it points, another host included."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _get(url: str, headers: Mapping[str, str], timeout: float) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=dict(headers))
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            status, body = response.status, response.read(MAX_BODY + 1)
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise ScrapeError(f"unreachable: {reason}") from None
    if len(body) > MAX_BODY:
        raise ScrapeError(f"{urlsplit(url).path} answered more than {MAX_BODY // 2**20} MiB")
    return status, body


def scrape(url: str, headers: Mapping[str, str], timeout: float = TIMEOUT) -> Snapshot:
    """One replica's :class:`Snapshot`; raises :class:`ScrapeError` when it cannot be read."""
    status, body = _get(url + "/health", headers, timeout)
    if status != 200:
        raise ScrapeError(f"/health answered HTTP {status}")
    try:
        health = json.loads(body)
    except ValueError:
        health = None
    if not isinstance(health, dict):
        raise ScrapeError("/health did not answer a JSON object: not an OpenEnv server")
    at = time.monotonic()
    status, body = _get(url + "/metrics", headers, timeout)
    if status == 404:  # metrics off (OPENENV_METRICS=0): what /health says
        return from_health(health, at)
    if status in _AUTH:
        given = "Authorization" in headers
        raise ScrapeError(
            f"/metrics refused the API key (HTTP {status}): set OPENENV_API_KEY to the server's key"
            if given
            else f"/metrics needs the server's API key (HTTP {status}): export OPENENV_API_KEY=<key>"
        )
    if status != 200:
        raise ScrapeError(f"/metrics answered HTTP {status}")
    try:
        return from_metrics(body.decode("utf-8", "replace"), health, at)
    except (ValueError, KeyError, TypeError) as exc:
        raise ScrapeError(f"/metrics is not an OpenEnv server's metrics: {exc}") from None


class Fleet:
    """The replicas at ``urls``, read on each :meth:`poll`; rates span two polls."""

    def __init__(
        self, urls: Sequence[str], headers: Mapping[str, str], timeout: float = TIMEOUT
    ) -> None:
        self.urls = list(dict.fromkeys(urls))
        self.headers = dict(headers)
        self.timeout = timeout
        self.previous: dict[str, Snapshot] = {}

    def _read(self, url: str) -> Snapshot | str:
        try:
            return scrape(url, self.headers, self.timeout)
        except ScrapeError as exc:
            return str(exc)

    def poll(self) -> list[dict[str, Any]]:
        """Every replica read now, in the order given: a view each (``error`` for one that
        could not be read)."""
        with ThreadPoolExecutor(max_workers=min(32, max(1, len(self.urls)))) as pool:
            found = list(pool.map(self._read, self.urls))
        views = []
        for url, result in zip(self.urls, found, strict=True):
            if isinstance(result, str):
                self.previous.pop(url, None)
                views.append(down_view(url, result))
                continue
            views.append(replica_view(url, result, self.previous.get(url)))
            self.previous[url] = result
        return views


def sample(fleet: Fleet, interval: float) -> list[dict[str, Any]]:
    """Two polls ``interval`` seconds apart: the second, with its rates over that window."""
    fleet.poll()
    time.sleep(interval)
    return fleet.poll()
