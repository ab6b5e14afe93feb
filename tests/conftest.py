"""Fixtures shared by the whole suite. Helpers live in ``tests/support/``; fixtures here."""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.optional import missing_package_reason

if TYPE_CHECKING:
    import docker


class _OptionalImportsModule(pytest.Module):
    """A test module that is skipped, not an error, when it imports a missing optional package."""

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        try:
            self.obj  # noqa: B018  (imports the module)
        except self.CollectError as exc:
            reason = missing_package_reason(exc.__cause__)
            if reason is None:
                raise
            pytest.skip(f"{self.nodeid}: {reason}", allow_module_level=True)
        return super().collect()


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module:
    """Collect every test module through :class:`_OptionalImportsModule`."""
    return _OptionalImportsModule.from_parent(parent, path=module_path)


def _skip_when_optional_package_missing() -> Generator[None, object, object]:
    try:
        return (yield)
    except ModuleNotFoundError as exc:
        reason = missing_package_reason(exc)
        if reason is None:
            raise
        pytest.skip(reason)


# Code under test that imports an optional package lazily: skip the test (fail it in CI).
pytest_runtest_setup = pytest.hookimpl(wrapper=True)(_skip_when_optional_package_missing)
pytest_runtest_call = pytest.hookimpl(wrapper=True)(_skip_when_optional_package_missing)


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
