"""DockerProvider and EnvClient.from_docker_image against the real engine, with an image that
`openenv build` made from a generated project; faults: missing image, a container that exits at
start, a taken port, no engine, Ctrl-C during from_docker_image (containers counted)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from openenv_runtime import EnvPool, GenericEnvClient, StepResult
from openenv_runtime.providers import DockerProvider, ProviderError
from openenv_runtime.providers.base import health
from openenv_runtime.providers.docker import RUN_LABEL
from openenv_runtime.providers.space import space_image
from tests.support.provider_images import (  # noqa: F401 (fixtures)
    CRASH_LINE,
    PREFIX,
    RUN_ID,
    containers_named,
    crashing_image,
    env_image,
    sleeping_image,
)
from tests.support.servers import wait_until

ROOT = Path(__file__).resolve().parents[2]
NAME = f"{PREFIX}-{RUN_ID}"


@pytest.fixture(autouse=True)
def nothing_left(client: docker.DockerClient) -> Iterator[None]:
    """Every test leaves no container of ours behind (removed by id if it did, then failed)."""
    yield
    left = containers_named(client, NAME)
    for container_id in left:
        client.containers.get(container_id).remove(force=True)
    assert not left, f"containers left running: {left}"


def test_replicas_with_env_labels_and_limits(client: docker.DockerClient, env_image: str) -> None:  # noqa: F811
    provider = DockerProvider(
        env_image,
        replicas=2,
        env={"MAX_CONCURRENT_ENVS": "5"},
        cpus=0.5,
        mem_limit="256m",
        labels={"team": "rl"},
        name_prefix=NAME,
    )
    with provider as urls:
        assert len(set(urls)) == 2
        for url in urls:
            assert health(url)["max_sessions"] == 5  # type: ignore[index]
        container = client.containers.get(provider.container_ids[0])
        assert container.labels[RUN_LABEL] == provider.run_id and container.labels["team"] == "rl"
        host_config = container.attrs["HostConfig"]
        assert host_config["NanoCpus"] == 500_000_000 and host_config["Memory"] == 256 << 20
        with GenericEnvClient(urls[1]).sync() as env:
            env.reset()
            assert env.step({"message": "hi"}).observation["echoed_message"] == "hi"
    assert (
        client.containers.list(all=True, filters={"label": f"{RUN_LABEL}={provider.run_id}"}) == []
    )
    provider.stop()


def test_pool_over_replicas(env_image: str) -> None:  # noqa: F811
    async def go() -> None:
        provider = DockerProvider(env_image, replicas=2, name_prefix=NAME)
        async with EnvPool(GenericEnvClient, provider=provider, size=4) as pool:
            assert len({pool.server_of(i) for i in range(4)}) == 2
            assert all(isinstance(r, StepResult) for r in await pool.reset())
            results = await pool.step([{"message": str(i)} for i in range(4)])
            assert [r.observation["echoed_message"] for r in results] == ["0", "1", "2", "3"]  # type: ignore[union-attr]
        assert not provider.running

    asyncio.run(go())


def test_from_docker_image_sync_and_async(client: docker.DockerClient, env_image: str) -> None:  # noqa: F811
    with GenericEnvClient.from_docker_image(env_image).sync() as env:
        assert env.step({"message": "abc"}).observation["echoed_message"] == "abc"
        provider = env.client._provider
        assert provider is not None
        run_id = provider.run_id  # type: ignore[attr-defined]
    label = {"label": f"{RUN_LABEL}={run_id}"}
    assert client.containers.list(all=True, filters=label) == []

    async def in_async_code() -> str:
        env = await GenericEnvClient.from_docker_image(
            env_image, env_vars={"MAX_CONCURRENT_ENVS": "2"}
        )
        async with env:
            assert health(env.base_url)["max_sessions"] == 2  # type: ignore[index]
            return str((await env.step({"message": "x"})).observation["echoed_message"])

    assert asyncio.run(in_async_code()) == "x"


def test_from_env_with_docker_runs_the_space_image(
    client: docker.DockerClient,
    env_image: str,  # noqa: F811
) -> None:
    repo_id = f"{PREFIX}/space-{RUN_ID}"
    image = space_image(repo_id)
    client.images.get(env_image).tag(image)
    try:
        with GenericEnvClient.from_env(repo_id, use_docker=True).sync() as env:
            assert env.step({"message": "space"}).observation["echoed_message"] == "space"
            assert env.client._provider.image == image  # type: ignore[union-attr]
    finally:
        client.images.remove(image)


def test_missing_image_says_how_to_build_it() -> None:
    with pytest.raises(
        ProviderError, match=r"is not on this engine; build it with `openenv build`"
    ):
        DockerProvider(f"{PREFIX}/absent:{RUN_ID}", name_prefix=NAME).start()


def test_container_exiting_at_start_shows_its_log(crashing_image: str) -> None:  # noqa: F811
    provider = DockerProvider(crashing_image, name_prefix=NAME)
    with pytest.raises(ProviderError) as info:
        provider.start()
    message = str(info.value)
    assert "exited with code 3" in message and CRASH_LINE in message
    assert not provider.running


def test_taken_host_port(env_image: str) -> None:  # noqa: F811
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(ProviderError, match=rf"host port {port} is taken"):
            DockerProvider(env_image, host_port=port, name_prefix=NAME).start()


def test_no_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(ProviderError, match=r"no Docker engine answers .*systemctl start docker"):
        DockerProvider("any:latest").start()


def test_ctrl_c_during_from_docker_image(client: docker.DockerClient, sleeping_image: str) -> None:  # noqa: F811
    """SIGINT while from_docker_image waits for /health: the child exits, no container is left."""
    script = textwrap.dedent(
        f"""
        from openenv_runtime import GenericEnvClient
        GenericEnvClient.from_docker_image({sleeping_image!r})
        """
    )
    ours = {"ancestor": sleeping_image}
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(
            lambda: bool(client.containers.list(filters={**ours, "status": "running"})), timeout=60
        )
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
        assert child.returncode != 0 and "KeyboardInterrupt" in err
        assert client.containers.list(all=True, filters=ours) == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for container in client.containers.list(all=True, filters=ours):
            container.remove(force=True)


def test_interpreter_exit_removes_containers(client: docker.DockerClient, env_image: str) -> None:  # noqa: F811
    """A program that starts a provider and ends without stopping it leaves no container."""
    script = textwrap.dedent(
        f"""
        from openenv_runtime.providers import DockerProvider
        provider = DockerProvider({env_image!r}, name_prefix={NAME!r})
        provider.start()
        print(provider.container_ids[0], flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    container_id = done.stdout.split()[0]
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(container_id)
