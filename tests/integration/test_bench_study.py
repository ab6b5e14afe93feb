"""``openenv bench --study local`` on a project made by ``openenv init``: deployed with
``openenv serve``, measured with a tiny grid, taken down, reported (no timed assertion)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import docker.errors
import pytest

pytestmark = pytest.mark.integration


def openenv(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openenv_cli.main", *args],
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd,
    )  # fmt: skip


def test_study_local_with_a_tiny_grid(tmp_path: Path) -> None:
    done = openenv("init", "study_env", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    project = tmp_path / "study_env"
    out = tmp_path / "report"
    done = openenv(
        "bench", "--study", "local", "--requests-grid", "4,8", "--wait-grid", "0",
        "--reps", "1", "--output-dir", str(out), cwd=project,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "local: taken down (pid " in done.stdout
    document = json.loads((out / "study.json").read_text())
    (local,) = document["infras"]
    assert local["status"] == "measured"
    assert [p["batch"] for p in local["points"]] == [4, 8]
    assert all(p["attempted"] == p["batch"] for p in local["points"])
    text = (out / "study.md").read_text()
    assert "### Latency breakdown" in text and "local-uvicorn (8 workers)" in text
    assert (out / "study.png").read_bytes()[:4] == b"\x89PNG"
    pid = int(local["handle"].removeprefix("pid "))
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


def test_study_skips_what_is_not_there(tmp_path: Path) -> None:
    """With no Slurm on PATH and no engine at DOCKER_HOST, both are skipped with the reason."""
    if os.environ.get("CI"):
        pytest.skip("changes PATH and DOCKER_HOST; the unit tests cover the reasons in CI")
    done = openenv("init", "study_env", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    env = {**os.environ, "PATH": "/usr/local/nothing", "DOCKER_HOST": "tcp://127.0.0.1:1"}
    done = subprocess.run(
        [sys.executable, "-m", "openenv_cli.main", "bench", "--study", "slurm,swarm",
         "--output-dir", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path / "study_env", env=env,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "slurm: skipped (no Slurm here (`sinfo` is not on PATH))" in done.stdout
    assert "swarm: skipped (no Docker engine answers" in done.stdout
    document = json.loads((tmp_path / "r" / "study.json").read_text())
    assert [i["status"] for i in document["infras"]] == ["skipped", "skipped"]


@pytest.mark.docker
def test_study_docker_sends_the_load_through_the_kernels_nat(
    tmp_path: Path, client: docker.DockerClient, base_image: str
) -> None:
    """The container's port is published on the Docker bridge's host address and the load goes
    there, not through the engine's userland proxy at 127.0.0.1 (which drops every connection
    when it runs out of open files); the container is removed afterwards."""
    from openenv_cli.bench.study_net import bridge_gateway

    done = openenv("init", "nat_probe_env", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    project = tmp_path / "nat_probe_env"
    out = tmp_path / "report"
    env = {**os.environ, "OPENENV_BASE_IMAGE": base_image}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "openenv_cli.main", "bench", "--study", "docker",
             "--requests-grid", "4,8", "--wait-grid", "0", "--reps", "1",
             "--output-dir", str(out)],
            capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
            cwd=project, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        (outcome,) = json.loads((out / "study.json").read_text())["infras"]
        assert outcome["status"] == "measured"
        assert all(p["success_rate"] == 1.0 for p in outcome["points"])
        gateway = bridge_gateway(client, "bridge")
        assert gateway is not None, "the Docker bridge's gateway should be an address of this host"
        assert outcome["notes"][0].startswith(f"reached at {gateway}:")
        assert "kernel's NAT" in outcome["notes"][0]
        container_id = outcome["handle"].removeprefix("container ")
        assert not client.containers.list(all=True, filters={"id": container_id})
    finally:
        for tag in ("nat_probe_env:latest", "nat_probe_env:0.1.0"):
            try:
                client.images.remove(tag)
            except docker.errors.DockerException:
                pass
