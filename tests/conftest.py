"""Fixtures shared by the whole suite. Helpers live in ``tests/support/``; fixtures here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import docker


@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    """A connected Docker engine client for one test module (fails in CI, skips elsewhere, without an engine)."""
    from tests.support.docker_engine import docker_client

    engine = docker_client()
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def base_image(client: docker.DockerClient) -> str:
    """The local python:3.11-slim stand-in, built once and cached."""
    from tests.support.base_image import ensure_base_image

    return ensure_base_image(client=client)
