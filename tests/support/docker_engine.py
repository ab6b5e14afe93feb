"""Docker engine access for tests.

``docker_client()`` returns a connected client, or fails the test (when ``CI`` is set)
or skips it (elsewhere) with a hint to start an engine with ``.ci/docker-engine.sh``.
``run_once()`` and ``started_container()`` run containers and always remove them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

import docker
import docker.errors
import pytest
import requests
from docker.models.containers import Container

ENGINE_HINT = "run `bash .ci/docker-engine.sh` as root to install and start one"


def in_ci() -> bool:
    """True when the ``CI`` environment variable is set (to anything but "", "0" or "false")."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def engine_error() -> str | None:
    """Why no Docker engine answers, or None when one does."""
    try:
        client = docker.from_env(timeout=10)
        try:
            client.ping()
        finally:
            client.close()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def docker_client(timeout: int = 300) -> docker.DockerClient:
    """A client connected to the local engine (API version negotiated with the daemon).

    With no engine answering, the calling test fails when ``CI`` is set and is skipped
    otherwise. ``timeout`` is the HTTP read timeout in seconds for each API call.
    """
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
        return client
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        message = f"no Docker engine answers ({type(exc).__name__}: {exc}); {ENGINE_HINT}"
    if in_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def run_once(
    client: docker.DockerClient,
    image: str,
    command: str | Sequence[str],
    *,
    timeout: float = 120,
    **create_kwargs: Any,
) -> tuple[int, str]:
    """Run ``command`` in a new container of ``image``; return (exit code, stdout+stderr).

    The container is removed afterwards whatever happens; after ``timeout`` seconds it
    is killed and the wait raises.
    """
    container = client.containers.create(image, command, **create_kwargs)
    try:
        container.start()
        status = container.wait(timeout=timeout)
        output = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        return int(status["StatusCode"]), output
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)


@contextlib.contextmanager
def started_container(
    client: docker.DockerClient,
    image: str,
    command: str | Sequence[str] | None = None,
    **run_kwargs: Any,
) -> Iterator[Container]:
    """Start a detached container and force-remove it on exit."""
    container = client.containers.run(image, command, detach=True, **run_kwargs)
    try:
        yield container
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)
