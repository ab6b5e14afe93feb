"""First-ready stepping: how failed slots get their fresh sessions."""

from __future__ import annotations

import asyncio
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from openenv_runtime import EnvError, GenericEnvClient
from openenv_runtime.client import pool as pool_module
from openenv_runtime.client.first_ready import FirstReady
from openenv_runtime.client.pool import EnvPool


class _Unconnected(GenericEnvClient):
    """A client that opens nothing: placement is all this test looks at."""

    async def connect(self) -> _Unconnected:
        return self

    def abort(self) -> None:
        pass


def test_slots_failing_together_are_replaced_by_free_capacity_not_piled_on_one_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a can take 3 more sessions, b 2. Five slots fail in one turn of the loop (their server
    # went away): replaced one by one, each would read the same /health and all go to a.
    answers = {
        "http://a": {"status": "healthy", "active_sessions": 7, "max_sessions": 10},
        "http://b": {"status": "healthy", "active_sessions": 8, "max_sessions": 10},
    }
    monkeypatch.setattr(pool_module, "health", lambda url, timeout: answers[url])
    pool = EnvPool(_Unconnected, urls=list(answers), size=5)

    async def scenario() -> None:
        await pool.open()
        first_ready = FirstReady(pool, "next_step")
        request: Any
        for i in range(pool.size):
            request = SimpleNamespace(index=i)
            first_ready.on_failure(request, EnvError("CONNECTION_ERROR", "lost"))
        await asyncio.gather(*set(first_ready.replacing.values()))
        assert first_ready.replacing == {}

    asyncio.run(scenario())
    assert pool.failed == []
    assert Counter(pool.server_of(i) for i in range(5)) == {"http://a": 3, "http://b": 2}
