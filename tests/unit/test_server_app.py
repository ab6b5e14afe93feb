import asyncio
import gc

import pytest

from openenv_runtime.server.app import collect_connection_cycles


class Counter:
    total_opened = 0


def test_cycles_are_collected_every_n_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    collected: list[int] = []
    monkeypatch.setattr(gc, "collect", lambda *a: collected.append(1) or 0)
    manager = Counter()

    async def go() -> None:
        task = asyncio.get_running_loop().create_task(collect_connection_cycles(manager, every=3))  # type: ignore[arg-type]
        await asyncio.sleep(1.2)
        assert collected == []  # no sessions, no collection
        manager.total_opened = 3
        await asyncio.sleep(1.2)
        task.cancel()

    asyncio.run(go())
    assert collected == [1]
