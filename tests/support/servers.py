"""Helpers for tests that talk to real servers over real sockets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[2]
SOURCES = os.pathsep.join((str(REPO / "runtime"), str(REPO)))
"""``PYTHONPATH`` of a server process: this checkout's runtime and tests, whatever is installed."""


def get_json(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def post_json(url: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={"content-type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def wait_until(
    predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02
) -> bool:
    """Poll ``predicate`` until it holds (True) or ``timeout`` passes (False). Not a timing assertion."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def active_sessions(base_url: str) -> int:
    return get_json(base_url + "/health")[1]["active_sessions"]


def healthy(url: str) -> bool:
    """Whether ``url``/health answers 200 right now."""
    try:
        return get_json(url + "/health")[0] == 200
    except (OSError, ValueError):
        return False


def spawn_server(
    app: str,
    port: int,
    *,
    workers: int = 1,
    env: Mapping[str, str] | None = None,
    args: tuple[str, ...] = (),
    output: IO[Any] | int | None = subprocess.DEVNULL,
    cwd: Path = REPO,
    timeout: float = 30.0,
    python: str = sys.executable,
) -> subprocess.Popen[bytes]:
    """Start ``python -m openenv_runtime.serve APP`` on 127.0.0.1:``port`` and wait for /health.

    The one way the tests start a server process; the caller stops it by its handle
    (:func:`stop_process`, or :func:`server_process` which does both). ``python`` is the
    interpreter (another virtualenv's, for a library that must not enter this one).
    """
    process = subprocess.Popen(
        [
            *(python, "-m", "openenv_runtime.serve", app, "--host", "127.0.0.1"),
            *("--port", str(port), "--workers", str(workers), *args),
        ],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": _python_path(), "LOG_LEVEL": "warning", **(env or {})},
        stdout=output,
        stderr=subprocess.STDOUT if output is not subprocess.DEVNULL else subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    if not wait_until(lambda: healthy(url) or process.poll() is not None, timeout=timeout):
        stop_process(process)
        raise AssertionError(f"the server on port {port} did not answer within {timeout:.0f}s")
    if process.poll() is not None:
        raise AssertionError(f"the server on port {port} exited with {process.returncode}")
    return process


def stop_process(process: subprocess.Popen[Any], grace: float = 15.0) -> None:
    """SIGTERM ``process`` (by its own handle), then SIGKILL if it outlives ``grace`` seconds."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@contextmanager
def server_process(app: str, port: int, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """:func:`spawn_server` for the length of a ``with`` block; stopped by its pid at the end."""
    process = spawn_server(app, port, env=env)
    try:
        yield process
    finally:
        stop_process(process)


def _python_path() -> str:
    """:data:`SOURCES` first, then what the caller had after it."""
    inherited = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(p for p in (SOURCES, inherited) if p)
