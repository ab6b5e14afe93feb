"""Group-consistent starts and forks over a pool of two servers: ``reset_group`` and ``fork``."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from openenv_runtime import EnvError, EnvPool, StepResult
from openenv_runtime.testing import running_server
from tests.fixtures.dice import DiceAction, DiceClient, DiceEnvironment, SeedlessDiceEnvironment
from tests.fixtures.dice import make_app as dice_app
from tests.fixtures.walk import WalkAction, WalkClient
from tests.fixtures.walk import make_app as walk_app

pytestmark = pytest.mark.integration

GROUPS = 200


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 120))


def rolls_of(seed: int) -> list[int]:
    """What the dice show after ``reset(seed=seed)`` (tests/fixtures/dice.py)."""
    rng = random.Random(seed)
    return [rng.randint(1, 6) for _ in range(DiceEnvironment.DICE)]


def test_reset_group_starts_every_member_alike_over_two_servers() -> None:
    with running_server(dice_app()) as one, running_server(dice_app()) as two:

        async def go() -> None:
            async with EnvPool(DiceClient, urls=[one, two], size=8) as pool:
                assert Counter(pool.server_of(i) for i in range(8)) == {one: 4, two: 4}
                for seed in range(GROUPS):
                    group = await pool.reset_group(8, seed=seed)
                    assert len(group) == 8
                    firsts = []
                    for result in group:
                        assert isinstance(result, StepResult), result
                        firsts.append(result.observation.rolls)
                    # identical over both servers, and made from this seed
                    assert firsts == [rolls_of(seed)] * 8

        run(go())


def test_reset_group_on_chosen_slots_leaves_the_others() -> None:
    with running_server(dice_app()) as url:

        async def go() -> None:
            async with EnvPool(DiceClient, urls=[url], size=6) as pool:
                await pool.reset(seeds=[100] * 6)
                await pool.step([DiceAction()] * 6)
                group = await pool.reset_group(3, seed=4, slots=[5, 1, 3])
                assert [r.observation.rolls for r in group] == [rolls_of(4)] * 3  # type: ignore[union-attr]
                steps = [(await pool[i].state()).step_count for i in range(6)]
                assert steps == [1, 0, 1, 0, 1, 0]
                for bad in ([0, 0], [0, 6], [0]):
                    with pytest.raises(ValueError):
                        await pool.reset_group(2, seed=1, slots=bad)

        run(go())


def test_reset_group_reports_an_environment_that_ignores_its_seed() -> None:
    with running_server(dice_app(SeedlessDiceEnvironment)) as url:

        async def go() -> None:
            async with EnvPool(DiceClient, urls=[url], size=8) as pool:
                with pytest.raises(EnvError) as info:
                    await pool.reset_group(8, seed=1)
                assert info.value.code == "GROUP_MISMATCH"
                assert "openenv validate" in info.value.message
                assert info.value.details["slots"]
                unchecked = await pool.reset_group(8, seed=1, check=False)
                assert all(isinstance(r, StepResult) for r in unchecked)

        run(go())


def test_sync_reset_group() -> None:
    with (
        running_server(dice_app()) as url,
        EnvPool(DiceClient, urls=[url], size=4).sync() as pool,
    ):
        group = pool.reset_group(4, seed=9)
        assert [r.observation.rolls for r in group] == [rolls_of(9)] * 4  # type: ignore[union-attr]


def test_pool_fork_spreads_over_the_servers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path / "checkpoints"))
    with running_server(walk_app()) as one, running_server(walk_app()) as two:

        async def go() -> None:
            async with EnvPool(WalkClient, urls=[one, two], size=2) as pool:
                await pool.reset(seeds=[3, 4])
                await pool.step([WalkAction(move=2)] * 2)
                forks = await pool.fork(0, n=6)
                try:
                    assert Counter(f.base_url for f in forks) == {one: 3, two: 3}
                    state = await pool[0].state()
                    assert [await f.state() for f in forks] == [state] * 6
                    nxt = (await pool[0].step(WalkAction())).observation
                    for f in forks:
                        assert (await f.step(WalkAction())).observation == nxt
                finally:
                    await asyncio.gather(*(f.close() for f in forks))

        run(go())


def test_sync_pool_fork(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path / "checkpoints"))
    with (
        running_server(walk_app()) as one,
        running_server(walk_app()) as two,
        EnvPool(WalkClient, urls=[one, two], size=1).sync() as pool,
    ):
        pool.reset()
        forks = pool.fork(0, n=2)
        try:
            assert sorted(f.base_url for f in forks) == sorted([one, two])
        finally:
            for f in forks:
                f.sync().close()
