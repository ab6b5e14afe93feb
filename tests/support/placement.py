"""A pool over two servers that never opens a socket: for tests of where slots are placed.

Server ``a`` has room for 3 more sessions, ``b`` for 2, as their ``/health`` says.
"""

from __future__ import annotations

import pytest

from openenv_runtime import GenericEnvClient
from openenv_runtime.client import pool as pool_module
from openenv_runtime.client.pool import EnvPool

ROOM = {
    "http://a": {"status": "healthy", "active_sessions": 7, "max_sessions": 10},
    "http://b": {"status": "healthy", "active_sessions": 8, "max_sessions": 10},
}
"""Each server's ``/health``: 3 free sessions on ``a``, 2 on ``b``."""


class Unconnected(GenericEnvClient):
    """A client that opens nothing: placement is all these tests look at."""

    async def connect(self) -> Unconnected:
        return self

    def abort(self) -> None:
        pass


def pool_over_room(monkeypatch: pytest.MonkeyPatch, size: int) -> EnvPool:
    """A pool of ``size`` unconnected slots over the servers of :data:`ROOM`."""
    monkeypatch.setattr(pool_module, "health", lambda url, timeout: ROOM[url])
    return EnvPool(Unconnected, urls=list(ROOM), size=size)
