"""SwarmProvider on the real engine's one-node swarm: replicas with their own host-mode ports,
scaling, removal on stop, and a task that exits at start (its log in the error)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import docker
import docker.errors
import pytest

from openenv_runtime import GenericEnvClient
from openenv_runtime.providers import ProviderError, SwarmProvider
from openenv_runtime.providers.base import health
from openenv_runtime.providers.docker import RUN_LABEL
from tests.support.docker_engine import in_ci
from tests.support.provider_images import (  # noqa: F401 (fixtures)
    CRASH_LINE,
    PREFIX,
    RUN_ID,
    crashing_image,
    env_image,
)

NAME = f"{PREFIX}-{RUN_ID}"


@pytest.fixture(scope="module", autouse=True)
def swarm(client: docker.DockerClient) -> None:
    """The engine is a swarm (initialised here if it is not; left as it is afterwards)."""
    if client.info().get("Swarm", {}).get("LocalNodeState") == "active":
        return
    done = subprocess.run(
        ["docker", "swarm", "init", "--advertise-addr", "127.0.0.1"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 and "already part of a swarm" not in done.stderr:
        message = f"docker swarm init failed: {done.stderr.strip()}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture(autouse=True)
def nothing_left(client: docker.DockerClient) -> Iterator[None]:
    yield
    services = [s for s in client.services.list() if s.name.startswith(NAME)]
    for service in services:
        service.remove()
    assert not services, f"services left behind: {[s.name for s in services]}"


def test_replicas_scale_and_removal(client: docker.DockerClient, env_image: str) -> None:  # noqa: F811
    provider = SwarmProvider(
        env_image, replicas=2, env={"MAX_CONCURRENT_ENVS": "3"}, cpus=0.5, name_prefix=NAME
    )
    with provider as urls:
        assert len(set(urls)) == 2
        assert all(health(u)["max_sessions"] == 3 for u in urls)  # type: ignore[index]
        for url in urls:
            with GenericEnvClient(url).sync() as env:
                assert env.step({"message": url}).observation["echoed_message"] == url
        spec = client.services.get(provider.service.id).attrs["Spec"]
        assert spec["Labels"][RUN_LABEL] == provider.run_id
        assert spec["EndpointSpec"]["Ports"][0]["PublishMode"] == "host"
        assert spec["TaskTemplate"]["Resources"]["Limits"]["NanoCPUs"] == 500_000_000

        three = provider.scale(3)
        assert len(set(three)) == 3 and set(urls) <= set(three)
        assert all(health(u) is not None for u in three)
        assert provider.scale(1) == provider.urls and len(provider.urls) == 1
        service_id = provider.service.id
    with pytest.raises(docker.errors.NotFound):
        client.services.get(service_id)
    label = {"label": f"{RUN_LABEL}={provider.run_id}"}
    assert client.containers.list(all=True, filters=label, ignore_removed=True) == []


def test_task_exiting_at_start_shows_its_log(crashing_image: str) -> None:  # noqa: F811
    provider = SwarmProvider(crashing_image, name_prefix=NAME, startup_timeout=60)
    with pytest.raises(ProviderError) as info:
        provider.start()
    message = str(info.value)
    assert "exit code 3" in message and CRASH_LINE in message, message
    assert not provider.running


def test_start_does_not_wait_for_the_images_health_check_interval(
    client: docker.DockerClient,
    env_image: str,  # noqa: F811
) -> None:
    """The generated image probes /health every 30 s: start() must not wait for that probe."""
    interval = client.images.get(env_image).attrs["Config"]["Healthcheck"]["Interval"]
    assert interval == 30 * 10**9
    with SwarmProvider(env_image, replicas=2, name_prefix=NAME) as urls:
        assert all(health(u) is not None for u in urls)
        service = next(s for s in client.services.list() if s.name.startswith(NAME))
        api = tuple(int(p) for p in client.api.api_version.split(".")[:2])
        if api >= (1, 44):  # engines from 25 probe every second during the start period
            check = service.attrs["Spec"]["TaskTemplate"]["ContainerSpec"]["Healthcheck"]
            assert check["StartInterval"] == 10**9
        else:  # older ones: the servers answer while the swarm still waits for its first probe
            states = [t["Status"]["State"] for t in service.tasks()]
            assert "starting" in states, states
