"""Every setting acts the same with one worker or two, whichever launcher and source set it."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from openenv_cli.scaffold import render_project, write_project
from openenv_runtime.testing import free_port
from tests.support.servers import wait_until

CLEARED = (
    "HOST",
    "PORT",
    "WORKERS",
    "MAX_CONCURRENT_ENVS",
    "SESSION_TIMEOUT",
    "ENABLE_WEB_INTERFACE",
    "MAX_SESSIONS_PER_CLIENT",
    "OPENENV_SERVER_FLAGS",
    "OPENENV_MANIFEST",
)
# The settings under test and how each source spells them.
FLAGS = [
    "--max-concurrent-envs", "3", "--session-timeout", "1", "--no-web",
    "--max-sessions-per-client", "1",
]  # fmt: skip
ENV = {
    "MAX_CONCURRENT_ENVS": "3",
    "SESSION_TIMEOUT": "1",
    "ENABLE_WEB_INTERFACE": "false",
    "MAX_SESSIONS_PER_CLIENT": "1",
}
YAML = {
    "max_concurrent_envs": 3,
    "session_timeout": 1,
    "web_interface": False,
    "max_sessions_per_client": 1,
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("settings") / "settings_env"
    write_project(render_project("settings_env", {}), dest, force=False)
    return dest


def launch(
    project: Path, launcher: str, source: str, workers: int, port: int, manifest: Path
) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = str(project.parent)
    args: list[str] = []
    if source == "flags":
        args = list(FLAGS)
    elif source == "env":
        env.update(ENV)
    if launcher == "cli":
        command = [sys.executable, "-m", "openenv_cli.main", "serve", str(project)]
        command += ["--port", str(port), "--workers", str(workers)]
    else:
        command = [sys.executable, "-m", "openenv_runtime.serve", "settings_env.server.app:app"]
        command += ["--port", str(port), "--workers", str(workers), "--manifest", str(manifest)]
    return subprocess.Popen(
        command + args,
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


class Worker:
    """One keep-alive connection: every request lands on the same worker process."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        self.conn.request(method, path, body=data, headers={"content-type": "application/json"})
        response = self.conn.getresponse()
        raw = response.read()
        try:
            return response.status, json.loads(raw)
        except ValueError:
            return response.status, raw


def up(port: int) -> bool:
    try:
        return Worker(port).call("GET", "/health")[0] == 200
    except OSError:
        return False


def check_worker(port: int) -> int:
    """Checks every setting on one worker; returns its pid."""
    worker = Worker(port)
    status, health = worker.call("GET", "/health")
    assert status == 200 and health["max_sessions"] == 3  # max_concurrent_envs
    assert worker.call("GET", "/web/")[0] == 404  # web interface off
    status, opened = worker.call("POST", "/reset")
    assert status == 200
    assert worker.call("POST", "/reset")[0] == 429  # one session per client
    deadline = time.monotonic() + 10  # the idle session is reaped after 1 s
    while worker.call("GET", "/health")[1]["active_sessions"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert worker.call("GET", "/health")[1]["active_sessions"] == 0
    assert worker.call("POST", "/step", {"action": {"message": "x"}, **opened})[0] == 404
    return int(health["pid"])


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    ("launcher", "source"),
    [("cli", "flags"), ("cli", "yaml"), ("runtime", "env"), ("runtime", "flags")],
)
def test_every_setting_acts_with_any_worker_count(
    project: Path, tmp_path: Path, launcher: str, source: str, workers: int
) -> None:
    manifest = project / "openenv.yaml"
    original = manifest.read_text(encoding="utf-8")
    if source == "yaml":
        data = yaml.safe_load(original)
        data["server"].update(YAML)
        manifest.write_text(yaml.safe_dump(data), encoding="utf-8")
    port = free_port()
    process = launch(project, launcher, source, workers, port, manifest)
    try:
        assert wait_until(lambda: up(port), timeout=40), _stop(process)
        pids: set[int] = set()
        deadline = time.monotonic() + 30
        while len(pids) < workers and time.monotonic() < deadline:
            pids.add(check_worker(port))  # a new connection may land on another worker
        assert len(pids) == workers
    finally:
        output = _stop(process)
        manifest.write_text(original, encoding="utf-8")
    if launcher == "cli":  # the summary's "from" column names the source
        expected = {
            "flags": "--max-concurrent-envs",
            "yaml": "openenv.yaml: server.max_concurrent_envs",
        }
        line = next(x for x in output.splitlines() if x.strip().startswith("max_concurrent_envs"))
        assert expected[source] in line, output


def _stop(process: subprocess.Popen[str]) -> str:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.stdout.read() if process.stdout else ""
