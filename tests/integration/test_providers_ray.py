"""RayProvider on a local one-node Ray cluster (``ray.init()``): replicas as actors with their CPU
request, a server each, driven by a pool; a replica that cannot start names why."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv_runtime import EnvPool, GenericEnvClient, StepResult
from openenv_runtime.providers import ProviderError, RayProvider
from openenv_runtime.providers.base import health
from tests.support.optional import require
from tests.support.servers import wait_until

ROOT = Path(__file__).resolve().parents[2]
ECHO_APP = "tests.fixtures.echo_app:app"


@pytest.fixture(scope="module")
def ray() -> Iterator[Any]:
    ray = require("ray")
    ray.init(
        num_cpus=2,
        namespace=f"openenv-test-providers-{uuid.uuid4().hex[:8]}",
        include_dashboard=False,
        log_to_driver=False,
    )
    try:
        yield ray
    finally:
        ray.shutdown()


def test_replicas_as_actors(ray: Any) -> None:
    provider = RayProvider(
        ECHO_APP, replicas=2, num_cpus=0.5, env={"PYTHONPATH": str(ROOT)}, startup_timeout=90
    )
    with provider as urls:
        assert len(set(urls)) == 2
        assert ray.available_resources().get("CPU", 0) <= 1.0  # 2 × 0.5 reserved
        assert all(health(u) is not None for u in urls)

        async def drive() -> list[Any]:
            async with EnvPool(GenericEnvClient, urls=urls, size=4) as pool:
                await pool.reset()
                return await pool.step([{"message": "ray"}] * 4)

        results = asyncio.run(drive())
        assert all(isinstance(r, StepResult) for r in results)
    assert not provider.running
    assert all(health(u, timeout=1) is None for u in urls)
    # Killed actors hand their CPUs back asynchronously.
    assert wait_until(lambda: ray.available_resources().get("CPU", 0) == 2.0, timeout=30)


def test_replica_that_cannot_start(ray: Any, tmp_path: Path) -> None:
    (tmp_path / "ray_broken_app.py").write_text("raise RuntimeError('no GPU for this env')\n")
    provider = RayProvider(
        "ray_broken_app:app",
        num_cpus=0.5,
        env={"PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])},
        startup_timeout=60,
    )
    with pytest.raises(
        ProviderError, match=r"(?s)a Ray replica failed to start.*no GPU for this env"
    ):
        provider.start()
    assert not provider.running
