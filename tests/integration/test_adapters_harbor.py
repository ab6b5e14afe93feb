"""harbor:/PATH targets on the local Docker engine: a task folder built and served, solved by a
scripted policy (reward 1) and failed (reward 0), commands bounded in time and output, and no
container outliving its session or its server (SIGTERM included)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from websockets.sync.client import connect

from openenv_runtime import EnvClient
from openenv_runtime.adapters.harbor import (
    TASK_LABEL,
    HarborAction,
    HarborObservation,
    HarborState,
)
from openenv_runtime.adapters.target import create_family_app
from openenv_runtime.errors import AdapterError
from openenv_runtime.testing import free_port, running_server
from tests.support.harbor_task import INSTRUCTION, make_task
from tests.support.servers import healthy, spawn_server, wait_until

pytestmark = pytest.mark.docker


class HarborClient(EnvClient[HarborAction, HarborObservation, HarborState]):
    pass


def remove_built(client: docker.DockerClient, task: str) -> None:
    """Remove the containers, then the images, made for the task folder named ``task``."""
    for container in labelled(client, task):
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)
    for image in client.images.list(filters={"label": f"{TASK_LABEL}={task}"}):
        with contextlib.suppress(docker.errors.NotFound):
            client.images.remove(image.id, force=True)


def labelled(client: docker.DockerClient, task: str) -> list[Any]:
    return list(
        client.containers.list(
            all=True, filters={"label": f"{TASK_LABEL}={task}"}, ignore_removed=True
        )
    )


@pytest.fixture
def task(tmp_path: Path, client: docker.DockerClient, base_image: str) -> Iterator[Path]:
    """A task folder with a unique name; its containers and image removed (by id) at the end."""
    root = make_task(tmp_path / f"hello-{uuid.uuid4().hex[:8]}", base_image=base_image)
    try:
        yield root
    finally:
        remove_built(client, root.name)


def test_a_scripted_policy_solves_the_task_and_an_idle_one_fails(
    task: Path, client: docker.DockerClient
) -> None:
    app = create_family_app(f"harbor:{task}?warm=1&max_output=1000&command_timeout=30")
    with running_server(app) as url:
        with HarborClient(base_url=url).sync() as env:
            first = env.reset()
            assert first.observation.instruction == INSTRUCTION
            ran = env.step(
                HarborAction(command="pwd; echo hello > hello.txt; echo oops >&2; exit 3")
            )
            assert (ran.observation.stdout, ran.observation.stderr) == ("/app\n", "oops\n")
            assert ran.observation.exit_code == 3 and not ran.done
            read = env.step(HarborAction(read_path="/app/hello.txt"))
            assert read.observation.content == "hello\n"
            solved = env.step(HarborAction(submit=True))
            assert solved.done and solved.reward == 1.0
            assert solved.observation.rewards == {"reward": 1.0}

            # A new episode is a fresh container: the file is gone. A reward planted where the
            # verifier writes its own does not count.
            env.reset()
            gone = env.step(HarborAction(command="cat /app/hello.txt"))
            assert gone.observation.exit_code != 0
            env.step(HarborAction(command="mkdir -p /logs/verifier /tests"))
            env.step(HarborAction(write_path="/logs/verifier/reward.txt", content="1\n"))
            env.step(HarborAction(write_path="/tests/test.sh", content="exit 0\n"))
            plant = (
                "while true; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; done"
            )
            env.step(HarborAction(command=f"nohup sh -c '{plant}' >/dev/null 2>&1 &"))
            failed = env.step(HarborAction(submit=True))
            assert failed.done and failed.reward == 0.0

            # Commands are bounded in time and output.
            env.reset()
            slow = env.step(HarborAction(command="sleep 60", time_limit=1))
            assert slow.observation.timed_out and not slow.done
            loud = env.step(HarborAction(command="head -c 5000 /dev/zero | tr '\\0' a"))
            assert loud.observation.truncated and loud.observation.stdout == "a" * 1000
            written = env.step(HarborAction(write_path="deep/er/hello.txt", content="hello"))
            assert written.observation.exit_code == 0
            assert env.step(HarborAction(submit=True)).reward == 0.0  # /app/hello.txt is missing
            # the session's container goes with the session; the warm one stays for the next
            assert wait_until(lambda: len(labelled(client, task.name)) == 2)
        assert wait_until(lambda: len(labelled(client, task.name)) == 1)
    # and the warm one goes with the server
    assert labelled(client, task.name) == []


def test_sigterm_removes_every_container_the_server_made(
    task: Path, client: docker.DockerClient
) -> None:
    port = free_port()
    process = spawn_server(f"harbor:{task}?warm=2&command_timeout=300", port, timeout=120)
    try:
        with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=10) as ws:
            ws.send(json.dumps({"type": "reset"}))
            assert json.loads(ws.recv(timeout=60))["type"] == "observation"
            # a session busy with a long command, and two warm containers waiting
            ws.send(json.dumps({"type": "step", "data": {"command": "sleep 300"}}))
            assert wait_until(lambda: len(labelled(client, task.name)) == 3, timeout=60)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=45) == 0
        assert labelled(client, task.name) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)


def test_a_missing_base_image_is_a_build_error_naming_the_dockerfile(
    tmp_path: Path, client: docker.DockerClient
) -> None:
    root = make_task(tmp_path / "broken", base_image="openenv-test/no-such-image:never")
    with pytest.raises(AdapterError, match="environment/Dockerfile did not build"):
        create_family_app(f"harbor:{root}?warm=0")


def test_openenv_serve_takes_a_harbor_target(task: Path, client: docker.DockerClient) -> None:
    """The one-command form, through the CLI."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "openenv_cli", "serve", f"harbor:{task}", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        assert wait_until(lambda: healthy(url) or process.poll() is not None, timeout=120)
        with HarborClient(base_url=url).sync() as env:
            assert env.reset().observation.instruction == INSTRUCTION
            env.step(HarborAction(write_path="/app/hello.txt", content="hello"))
            assert env.step(HarborAction(submit=True)).reward == 1.0
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(45)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    assert labelled(client, task.name) == []


def test_the_docs_page_block_solves_the_task(task: Path, client: docker.DockerClient) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "env-harbor.md").read_text()
    (block,) = re.findall(r"^```python\n(.*?)^```", page, re.S | re.M)
    assert '"/abs/path/to/task"' in block
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.replace("/abs/path/to/task", str(task)), "<docs>", "exec"), {})
    assert out.getvalue().splitlines() == [INSTRUCTION.strip(), "0", "1.0 True"]
    assert labelled(client, task.name) == []


def test_a_warm_container_that_ended_while_waiting_is_replaced(
    task: Path, client: docker.DockerClient
) -> None:
    app = create_family_app(f"harbor:{task}?warm=1")
    with running_server(app) as url:
        assert wait_until(lambda: len(labelled(client, task.name)) == 1, timeout=60)
        (warm,) = labelled(client, task.name)
        warm.kill()
        with HarborClient(base_url=url).sync() as env:
            env.reset()
            assert env.step(HarborAction(command="echo alive")).observation.stdout == "alive\n"
    assert labelled(client, task.name) == []


def test_the_agents_time_and_the_verifiers_time_come_from_task_toml(
    tmp_path: Path, client: docker.DockerClient, base_image: str
) -> None:
    toml = "[agent]\ntimeout_sec = 1.5\n[verifier]\ntimeout_sec = 1.0\n"
    root = make_task(tmp_path / f"slow-{uuid.uuid4().hex[:8]}", toml=toml, base_image=base_image)
    (root / "tests" / "test.sh").write_text("sleep 30\necho 1 > /logs/verifier/reward.txt\n")
    try:
        app = create_family_app(f"harbor:{root}?warm=0")
        with running_server(app) as url, HarborClient(base_url=url).sync() as env:
            assert env.reset().observation.time_left == 1.5
            cut = env.step(HarborAction(command="sleep 30"))  # cut to the agent's 1.5 s
            assert cut.observation.timed_out
            late = env.step(HarborAction(command="echo too late"))
            assert late.observation.error is not None and "submit" in late.observation.error
            assert late.observation.stdout == ""
            verified = env.step(HarborAction(submit=True))  # test.sh is stopped after 1 s
            assert verified.done and verified.reward == 0.0 and verified.observation.timed_out
            assert "wrote no" in (verified.observation.error or "")
    finally:
        remove_built(client, root.name)
