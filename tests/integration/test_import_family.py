"""`openenv import FAMILY:NAME` writes a project that `openenv validate` passes without Docker,
for each family (heavy: each imports its library several times, in several processes); a
Harbor task's project also builds with `openenv build` and is solved in its own image."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import docker
import docker.errors
import pytest

from openenv_runtime import EnvClient
from openenv_runtime.adapters.harbor import (
    HarborAction,
    HarborObservation,
    HarborState,
)
from openenv_runtime.testing import free_port
from tests.integration.test_family_targets import openenv
from tests.support.docker_engine import started_container
from tests.support.harbor_task import INSTRUCTION, make_task
from tests.support.optional import require
from tests.support.servers import REPO, healthy, wait_until

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("target", "module"),
    [
        ("gymnasium:CartPole-v1", "gymnasium"),
        ("reasoning_gym:leg_counting?size=10&seed=1", "reasoning_gym"),
        ("textarena:GuessTheNumber-v0", "textarena"),
    ],
)
def test_an_imported_project_validates_without_docker(
    target: str, module: str, tmp_path: Path
) -> None:
    require(module)
    made = openenv("import", target, "--out", "project", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    done = openenv("validate", "project", "--json", cwd=tmp_path)
    report = json.loads(done.stdout)
    failed = [check for check in report["checks"] if check["status"] == "fail"]
    assert done.returncode == 0 and report["ok"], failed
    statuses = {check["name"]: check["status"] for check in report["checks"]}
    assert statuses["contract"] == "pass"  # the lock import wrote matches what is served
    assert statuses["smoke.episode"] == "pass"


def test_an_imported_project_s_own_tests_pass(tmp_path: Path) -> None:
    require("gymnasium")
    made = openenv("import", "gymnasium:CartPole-v1", "--out", "pole", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    path = os.pathsep.join(
        [str(tmp_path), str(REPO / "runtime"), str(REPO), os.environ.get("PYTHONPATH", "")]
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path / "pole",
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


class HarborClient(EnvClient[HarborAction, HarborObservation, HarborState]):
    pass


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI of this checkout in a child process (a build takes minutes on a busy machine)."""
    path = os.pathsep.join([str(REPO / "runtime"), str(REPO), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "openenv_cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "PYTHONPATH": path, "COLUMNS": "1000", **env},
    )


def tags(client: docker.DockerClient) -> set[str]:
    return {name for image in client.images.list() for name in image.tags}


@pytest.mark.docker
def test_an_imported_harbor_task_builds_and_is_solved_in_its_own_image(
    tmp_path: Path, client: docker.DockerClient, base_image: str
) -> None:
    task = make_task(tmp_path / f"hello-{uuid.uuid4().hex[:8]}", base_image=base_image)
    made = cli("import", f"harbor:{task}", "--out", "hello", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    # validate needs no engine: none answers at this DOCKER_HOST
    done = cli("validate", "hello", "--json", cwd=tmp_path, DOCKER_HOST="tcp://127.0.0.1:9")
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["ok"], report["checks"]

    tag = f"openenv-test/harbor-import:{uuid.uuid4().hex[:10]}"
    before = tags(client)
    try:
        built = cli("build", "hello", "--tag", tag, cwd=tmp_path)
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
        # the task's own image (task/environment/), tagged as build.base_image names it
        assert "openenv-harbor-task/hello:latest" in tags(client)
        port = free_port()
        with started_container(client, tag, ports={"8000/tcp": ("127.0.0.1", port)}) as box:
            url = f"http://127.0.0.1:{port}"
            if not wait_until(lambda: healthy(url), timeout=90):
                pytest.fail(box.logs().decode("utf-8", "replace")[-3000:])
            with HarborClient(base_url=url).sync() as env:
                first = env.reset()
                assert first.observation.instruction == INSTRUCTION
                ran = env.step(HarborAction(command="pwd; echo hello > hello.txt"))
                assert ran.observation.stdout == "/app\n"  # the task image's WORKDIR
                solved = env.step(HarborAction(submit=True))
                assert solved.done and solved.reward == 1.0
                assert solved.observation.rewards == {"reward": 1.0}

                # Same container, next episode: undo the work, plant a reward and a test
                # script, leave a process rewriting the reward; the verifier's own run counts.
                env.reset()
                env.step(HarborAction(command="rm /app/hello.txt"))
                env.step(HarborAction(write_path="/tests/test.sh", content="exit 0\n"))
                plant = "while true; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; done"
                env.step(HarborAction(command=f"nohup sh -c '{plant}' >/dev/null 2>&1 &"))
                failed = env.step(HarborAction(submit=True))
                assert failed.done and failed.reward == 0.0
                assert failed.observation.rewards == {"reward": 0.0}
    finally:
        # By name, the project's image first (the task's is its parent): an image another
        # test shares is untagged, never deleted under it.
        ours = (tag, "openenv-harbor-task/hello:", "openenv-harbor/task:")
        new = sorted(
            (name for name in tags(client) - before if name.startswith(ours)),
            key=lambda name: name != tag,
        )
        for name in new:
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                client.images.remove(name)
