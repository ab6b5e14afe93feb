"""Read every replica's ``/health`` and ``/metrics``, all at once, each bounded in time and size.

A replica that cannot be read (down, refusing the key, answering something else) becomes an
error row, never an exception: one bad replica does not hide the others. The reads go through
the runtime's one HTTP reader (``openenv_runtime.http_reads``): the access token travels only
in the ``Authorization`` header, never on to where a redirect points, and no error message
repeats a header.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from openenv_cli.errors import UsageError
from openenv_cli.fleet.snapshot import Snapshot, down_view, from_health, from_metrics, replica_view
from openenv_runtime.client.endpoints import EndpointsError, check_url, read_endpoints
from openenv_runtime.errors import EnvError
from openenv_runtime.http_reads import read_answer

TIMEOUT = 5.0
"""Seconds one request to a replica may take before the replica shows as an error."""
_AUTH = (401, 403)


class ScrapeError(Exception):
    """Why one replica could not be read (shown in its row, and as ``error`` in JSON)."""


def replica_url(text: str) -> str:
    """``text`` as a base URL: ``http://`` added when no scheme is given, no trailing slash.

    Raises :class:`UsageError` for what is not a server URL, or one carrying a user or
    password (it would show in the view; the key goes in ``OPENENV_API_KEY``), a query or a
    fragment: the rule of ``endpoints.json``.
    """
    raw = text.strip()
    if "://" not in raw:
        raw = "http://" + raw
    try:
        return check_url(raw, "URL").rstrip("/")
    except EndpointsError:
        raise UsageError(
            "A replica URL is not a server URL, or carries a user, password, query or fragment.",
            hint="Write e.g. http://10.0.0.5:8000 or 10.0.0.5:8000; the key goes in "
            "OPENENV_API_KEY, never in the URL.",
        ) from None


def deploy_replicas(folder: Path) -> list[str]:
    """The replicas' URLs in ``folder``'s ``endpoints.json``, as ``openenv deploy`` wrote it."""
    try:
        found = read_endpoints(folder)
    except EndpointsError as error:
        raise UsageError(
            str(error), hint="Run openenv deploy with --out DIR, or name the replicas' URLs."
        ) from None
    if not found.replicas:
        front = f" (its front: {found.front})" if found.front else ""
        raise UsageError(
            f"{folder}'s endpoints.json lists no replica this machine reaches{front}; a "
            "front shows whichever replica answered each read.",
            hint="Name the replicas' URLs: Kubernetes pods e.g. through kubectl port-forward, "
            "Swarm tasks from a container on the stack's network.",
        )
    return found.replicas


def _get(url: str, path: str, token: str | None, timeout: float) -> tuple[int, bytes]:
    try:
        return read_answer(url, path, token=token, timeout=timeout)
    except EnvError as exc:
        raise ScrapeError(f"unreachable: {exc.message}") from None


def scrape(url: str, token: str | None, timeout: float = TIMEOUT) -> Snapshot:
    """One replica's :class:`Snapshot`; raises :class:`ScrapeError` when it cannot be read."""
    status, body = _get(url, "/health", token, timeout)
    if status != 200:
        raise ScrapeError(f"/health answered HTTP {status}")
    try:
        health = json.loads(body)
    except ValueError:
        health = None
    if not isinstance(health, dict):
        raise ScrapeError("/health did not answer a JSON object: not an OpenEnv server")
    at = time.monotonic()
    status, body = _get(url, "/metrics", token, timeout)
    if status == 404:  # metrics off (OPENENV_METRICS=0): what /health says
        return from_health(health, at)
    if status in _AUTH:
        raise ScrapeError(
            f"/metrics refused the API key (HTTP {status}): set OPENENV_API_KEY to the server's key"
            if token
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

    def __init__(self, urls: Sequence[str], token: str | None, timeout: float = TIMEOUT) -> None:
        self.urls = list(dict.fromkeys(urls))
        self.token = token
        self.timeout = timeout
        self.previous: dict[str, Snapshot] = {}

    def _read(self, url: str) -> Snapshot | str:
        try:
            return scrape(url, self.token, self.timeout)
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
