"""The Envoy front of `openenv deploy`: every target's rendered config passes Envoy's own
validate mode, and a real Envoy in front of two real servers spreads sessions over both and
keeps taking new sessions when one of them stops."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from openenv_cli.deploy import plan_deploy
from openenv_cli.deploy.render import write_files
from openenv_cli.deploy.slurm import EDS_PLACEHOLDER
from openenv_cli.scaffold import render_project, write_project
from openenv_runtime.testing import free_port
from tests.support.deploy_tools import (
    CLI_ENV,
    envoy_process,
    envoy_validate,
    episode,
    openenv,
    server_process,
    stop,
    wait_for,
)
from tests.support.servers import get_json

APP = "tests.fixtures.echo_app:app"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in CLI_ENV:
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_project(render_project("front_env"), tmp_path / "front_env")
    return tmp_path / "front_env"


@pytest.mark.parametrize("balancing", ["least_request", "session"])
@pytest.mark.parametrize("target", ["kubernetes", "swarm", "slurm"])
def test_every_target_config_passes_envoy_validate(
    target: str, balancing: str, project: Path, tmp_path: Path
) -> None:
    plan = plan_deploy(target, project, replicas=3, out=tmp_path / target, balancing=balancing)
    write_files(plan.files, plan.out, force=False)
    config = plan.out / "envoy" / "envoy.yaml"
    if target == "slurm":
        # What the batch script does once its tasks have started: the endpoint file, then the path.
        endpoints = tmp_path / "endpoints.yaml"
        endpoints.write_text(
            "resources:\n"
            '- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\n'
            "  cluster_name: replicas\n"
            "  endpoints:\n"
            "  - lb_endpoints:\n"
            "    - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 8000}}}\n"
        )
        job_config = tmp_path / "job-envoy.yaml"
        job_config.write_text(config.read_text().replace(EDS_PLACEHOLDER, str(endpoints)))
        config = job_config
    envoy_validate(config)


def test_envoy_target_from_a_backend_file_with_names(tmp_path: Path) -> None:
    backends = tmp_path / "backends.txt"
    backends.write_text("# the servers\nlocalhost:8001\n10.0.0.7:8002  # second\n")
    done = openenv("deploy", "envoy", "--backend", str(backends), "--port", "9100", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = tmp_path / "deploy" / "envoy" / "envoy.yaml"
    envoy_validate(config)
    cluster = yaml.safe_load(config.read_text())["static_resources"]["clusters"][0]
    assert cluster["cluster_type"]["name"] == "envoy.clusters.dns"  # a name: re-resolved
    hosts = [
        e["endpoint"]["address"]["socket_address"]
        for e in cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    ]
    assert hosts == [
        {"address": "localhost", "port_value": 8001},
        {"address": "10.0.0.7", "port_value": 8002},
    ]


def test_envoy_in_front_of_two_servers(tmp_path: Path) -> None:
    ports = [free_port(), free_port()]
    front_port = free_port()
    args = ["deploy", "envoy", "--port", str(front_port), "--out", str(tmp_path / "front")]
    for port in ports:
        args += ["--backend", f"127.0.0.1:{port}"]
    done = openenv(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = tmp_path / "front" / "envoy.yaml"
    envoy_validate(config)
    front = f"http://127.0.0.1:{front_port}"
    servers = [f"http://127.0.0.1:{port}" for port in ports]

    with (
        server_process(APP, ports[0]) as first,
        server_process(APP, ports[1]),
        envoy_process(config, front),
    ):
        # Envoy marks both healthy once its first checks pass.
        wait_for(lambda: all(_envoy_sees(front) for _ in range(3)), 20, "healthy upstreams")
        assert episode(front, "hello") == pytest.approx(0.5)

        # Sessions held open at once: least-request balancing gives both servers some.
        from openenv_runtime.client.generic import GenericEnvClient

        held = [GenericEnvClient(base_url=front).sync() for _ in range(8)]
        try:
            for env in held:
                env.connect()
                env.reset()
            counts = [get_json(url + "/health")[1]["active_sessions"] for url in servers]
            assert sum(counts) == 8 and min(counts) >= 2, counts

            # One server stops mid-run (its sessions end with it): every new session goes to
            # the other one and succeeds, even before Envoy's health check has noticed.
            stop(first)
            survivors = get_json(servers[1] + "/health")[1]["active_sessions"]
            assert survivors == counts[1]
            later = [GenericEnvClient(base_url=front).sync() for _ in range(6)]
            held += later
            for env in later:
                env.connect()
                env.reset()
                assert env.step({"message": "still here"}).observation["echoed_message"] == (
                    "still here"
                )
            assert get_json(servers[1] + "/health")[1]["active_sessions"] == survivors + 6
        finally:
            for env in held:
                try:
                    env.close()
                except Exception:
                    pass  # a session of the stopped server
        assert episode(front, "after") == pytest.approx(0.5)


def _envoy_sees(front: str) -> bool:
    try:
        return get_json(front + "/health")[0] == 200
    except OSError:
        return False
