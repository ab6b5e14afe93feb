"""The resuming client against a hostile or broken server: the grace period it announces
in ``X-OpenEnv-Resume-Grace`` bounds how long the client retries, so it is read defensively."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from openenv_runtime.client.resume import MAX_GRACE, ResumingTransport

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class FakeServer:
    url = "ws://server.invalid"

    def __init__(self, grace: str) -> None:
        self.grace = grace

    async def open_connection(self, headers: dict[str, str]) -> Any:
        return SimpleNamespace(
            response=SimpleNamespace(
                headers={
                    "X-OpenEnv-Session": "s" * 20,
                    "X-OpenEnv-Resume-Token": "t" * 20,
                    "X-OpenEnv-Resume-Grace": self.grace,
                }
            )
        )


@pytest.mark.parametrize(
    ("announced", "kept"),
    [
        ("30", 30.0),
        ("inf", MAX_GRACE),
        ("1e308", MAX_GRACE),
        ("nan", 0.0),
        ("-5", 0.0),
        ("-inf", 0.0),
        ("soon", 0.0),
        ("", 0.0),
    ],
)
async def test_the_announced_grace_is_finite_and_bounded(announced: str, kept: float) -> None:
    server = FakeServer(announced)
    transport = ResumingTransport(server.open_connection, server.url, None)
    await transport.connect()
    assert transport.resumable and transport.grace == kept
