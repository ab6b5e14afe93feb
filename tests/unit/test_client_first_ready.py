"""First-ready stepping: how failed slots get their fresh sessions."""

from __future__ import annotations

import asyncio
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from openenv_runtime import EnvError
from openenv_runtime.client.first_ready import FirstReady
from tests.support.placement import pool_over_room


def test_slots_failing_together_are_replaced_by_free_capacity_not_piled_on_one_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a can take 3 more sessions, b 2. Five slots fail in one turn of the loop (their server
    # went away): replaced one by one, each would read the same /health and all go to a.
    pool = pool_over_room(monkeypatch, size=5)

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
