"""The reference's one-server providers (``openenv_runtime.compat.containers.runtime``) for real:
LocalDockerProvider and DockerSwarmProvider on the engine, UVProvider with a server process,
and a client owning each (``provider=``, ``from_docker_image(..., provider=...)``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import docker
import docker.errors
import pytest

from openenv_runtime import GenericEnvClient
from openenv_runtime.compat.containers.runtime import (
    DockerSwarmProvider,
    LocalDockerProvider,
    UVProvider,
)
from openenv_runtime.providers import ProviderError
from openenv_runtime.providers.base import health
from openenv_runtime.providers.docker import RUN_LABEL
from openenv_runtime.providers.process import free_port
from openenv_runtime.providers.space import space_image
from tests.support.provider_images import crashing_image, env_image  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[2]


def _step(url: str) -> object:
    with GenericEnvClient(url).sync() as env:
        return env.step({"message": "hi"}).observation["echoed_message"]


@pytest.mark.docker
def test_local_docker_start_wait_stop(client: docker.DockerClient, env_image: str) -> None:  # noqa: F811
    provider = LocalDockerProvider()
    port = free_port()
    url = provider.start_container(env_image, port=port, env_vars={"MAX_CONCURRENT_ENVS": "3"})
    container_id = provider.container_id
    try:
        assert url.endswith(f":{port}") and provider.base_url == url
        provider.wait_for_ready(url, timeout_s=30)
        assert health(url)["max_sessions"] == 3  # type: ignore[index]
        assert _step(url) == "hi"
        with pytest.raises(RuntimeError, match="stop_container"):
            provider.start_container(env_image)
    finally:
        provider.stop_container()
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(container_id)
    provider.stop_container()  # nothing runs: a no-op
    assert provider.base_url is None


@pytest.mark.docker
def test_local_docker_crash_is_reported(crashing_image: str) -> None:  # noqa: F811
    provider = LocalDockerProvider()
    with pytest.raises(ProviderError, match="exited with code 3"):
        provider.start_container(crashing_image)
    assert provider.provider is None


@pytest.mark.docker
def test_from_docker_image_with_reference_provider(
    client: docker.DockerClient,
    env_image: str,  # noqa: F811
) -> None:
    provider = LocalDockerProvider()
    with GenericEnvClient.from_docker_image(env_image, provider=provider).sync() as env:
        assert env.step({"message": "x"}).observation["echoed_message"] == "x"
        container_id = provider.container_id
    assert provider.provider is None
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(container_id)


@pytest.mark.docker
def test_from_env_runs_the_space_image_with_a_reference_provider(
    client: docker.DockerClient,
    env_image: str,  # noqa: F811
) -> None:
    tag = space_image("openenv-test/containers-face")
    client.images.get(env_image).tag(tag)
    try:
        provider = LocalDockerProvider()
        with GenericEnvClient.from_env(
            "openenv-test/containers-face", use_docker=True, provider=provider
        ).sync() as env:
            assert env.step({"message": "hub"}).observation["echoed_message"] == "hub"
        assert provider.provider is None
    finally:
        client.images.remove(tag)


@pytest.mark.docker
@pytest.mark.swarm
def test_swarm_service_replicas_and_removal(
    client: docker.DockerClient,
    env_image: str,  # noqa: F811
) -> None:
    provider = DockerSwarmProvider(auto_init_swarm=False)
    with pytest.raises(ValueError, match="Unsupported kwargs"):
        provider.start_container(env_image, gpus=1)
    with pytest.raises(ValueError, match="replicas=1"):
        provider.start_container(env_image, port=free_port())
    url = provider.start_container(
        env_image, env_vars={"MAX_CONCURRENT_ENVS": "2"}, labels={"team": "rl"}, cpu_limit=0.5
    )
    inner = provider.provider
    assert inner is not None
    try:
        assert len(set(inner.urls)) == 2 and url == inner.urls[0]  # replicas default to 2
        provider.wait_for_ready(url)
        assert all(health(u)["max_sessions"] == 2 for u in inner.urls)  # type: ignore[index]
        spec = client.services.list(filters={"label": f"{RUN_LABEL}={inner.run_id}"})[0]
        assert spec.attrs["Spec"]["Labels"]["team"] == "rl"
        assert _step(url) == "hi"
    finally:
        provider.stop_container()
    assert client.services.list(filters={"label": f"{RUN_LABEL}={inner.run_id}"}) == []


def _project(tmp_path: Path, body: str) -> Path:
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "__init__.py").write_text("")
    (tmp_path / "server" / "app.py").write_text(textwrap.dedent(body))
    return tmp_path


def test_uv_provider_serves_a_project(tmp_path: Path) -> None:
    project = _project(tmp_path, "from tests.fixtures.echo_app import app  # noqa: F401\n")
    provider = UVProvider(project_path=str(project), env_vars={"PYTHONPATH": str(ROOT)})
    with pytest.raises(RuntimeError, match="not been started"):
        provider.wait_for_ready()
    port = free_port()
    url = provider.start(port=port)
    try:
        assert url == f"http://127.0.0.1:{port}" and provider.base_url == url
        provider.wait_for_ready(timeout_s=30)
        assert _step(url) == "hi"
        with pytest.raises(RuntimeError, match="already running"):
            provider.start()
    finally:
        provider.stop()
    assert health(url, timeout=1) is None
    with pytest.raises(RuntimeError):
        provider.base_url  # noqa: B018


def test_uv_provider_context_and_owning_client(tmp_path: Path) -> None:
    project = _project(tmp_path, "from tests.fixtures.echo_app import app  # noqa: F401\n")
    with UVProvider(project_path=str(project), env_vars={"PYTHONPATH": str(ROOT)}) as provider:
        url = provider.base_url
        assert health(url) is not None
    assert health(url, timeout=1) is None

    provider = UVProvider(project_path=str(project), env_vars={"PYTHONPATH": str(ROOT)})
    url = provider.start()
    with GenericEnvClient(base_url=url, provider=provider).sync() as env:
        assert env.step({"message": "owned"}).observation["echoed_message"] == "owned"
    assert health(url, timeout=1) is None  # closing the client stopped the server


def test_uv_provider_reports_a_crashing_app(tmp_path: Path) -> None:
    project = _project(tmp_path, "raise SystemExit('uv-provider-test: no app here')\n")
    provider = UVProvider(project_path=str(project), context_timeout_s=30)
    with pytest.raises(RuntimeError, match="no app here"):
        provider.start()
