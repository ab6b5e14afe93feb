"""`openenv serve` as a user runs it: a real process, real sockets, a generated project."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_cli.scaffold import render_project, write_project
from openenv_runtime.client.transport import Connection
from openenv_runtime.testing import free_port
from tests.support.servers import get_json, spawn_server, stop_process, wait_until


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("serve") / "serve_env"
    write_project(render_project("serve_env", {}), dest, force=False)
    return dest


def clean_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HOST", "PORT", "WORKERS", "MAX_CONCURRENT_ENVS")
    }
    env["PYTHONUNBUFFERED"] = "1"
    return env


def openenv(*args: str, cwd: Path, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "openenv_cli.main", *args],
        cwd=cwd,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kw,
    )  # type: ignore[call-overload]


def finish(process: subprocess.Popen[str]) -> str:
    """Wait for a command that is expected to end by itself."""
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
    return process.stdout.read() if process.stdout else ""


def stop(process: subprocess.Popen[str]) -> str:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.stdout.read() if process.stdout else ""


@pytest.fixture()
def served(project: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = free_port()
    process = openenv(
        "serve", "--port", str(port), "--workers", "2", "--max-concurrent-envs", "3", cwd=project
    )
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_until(lambda: _healthy(url), timeout=30), stop(process)
        yield url, process
    finally:
        stop(process)


def _healthy(url: str) -> bool:
    try:
        return get_json(url + "/health")[0] == 200
    except OSError:
        return False


def test_serve_runs_the_generated_project_and_its_client_steps_it(
    served: tuple[str, subprocess.Popen[str]], project: Path
) -> None:
    url, _ = served
    script = (
        "from serve_env import ServeEnv, ServeAction\n"
        f"with ServeEnv(base_url='{url}').sync() as env:\n"
        "    env.reset()\n"
        "    r = env.step(ServeAction(message='Hello'))\n"
        "    print(r.observation.echoed_message, r.reward)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        env={**clean_env(), "PYTHONPATH": str(project.parent)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Hello", "0.5"]


def test_two_workers_share_the_load(served: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = served
    pids: set[int] = set()
    # workers start independently; each new connection is hashed to one of their listeners
    assert wait_until(
        lambda: pids.add(get_json(url + "/health")[1]["pid"]) or len(pids) == 2, timeout=20
    )
    assert get_json(url + "/health")[1]["max_sessions"] == 3


def test_summary_and_graceful_stop(project: Path) -> None:
    port = free_port()
    process = openenv("serve", "--port", str(port), cwd=project)
    url = f"http://127.0.0.1:{port}"
    assert wait_until(lambda: _healthy(url), timeout=30)
    process.send_signal(signal.SIGTERM)
    # uvicorn shuts down gracefully, then re-raises the signal so the exit status tells why it stopped
    assert process.wait(20) in (0, -signal.SIGTERM)
    output = process.stdout.read() if process.stdout else ""
    assert "Application shutdown complete" in output
    for expected in (
        f"ws://127.0.0.1:{port}/ws",
        f"{url}/docs",
        f"{url}/web",
        f"{url}/health",
        "from serve_env import ServeEnv",
        "capacity",
    ):
        assert expected in output


def test_port_in_use_is_a_one_line_error(project: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        process = openenv("serve", "--port", str(port), cwd=project)
        output = finish(process)
    assert process.returncode == 1
    assert "in use" in output and "Traceback" not in output


def test_app_that_does_not_import_is_a_one_line_error(project: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken_env"
    write_project(render_project("broken_env", {}), broken, force=False)
    (broken / "server" / "app.py").write_text("import does_not_exist\n")
    process = openenv("serve", "--port", str(free_port()), cwd=broken)
    output = finish(process)
    assert process.returncode == 1
    assert "does not import" in output and "does_not_exist" in output and "Traceback" not in output


def test_folder_without_manifest(tmp_path: Path) -> None:
    process = openenv("serve", cwd=tmp_path)
    output = finish(process)
    assert process.returncode == 1 and "openenv.yaml" in output


@pytest.mark.parametrize(("workers", "connections"), [(1, 150), (2, 400)])
def test_the_apps_own_capacity_sets_how_many_connections_one_address_may_open(
    workers: int, connections: int
) -> None:
    """The bench environment's ``create_app`` asks for 65,536 sessions a worker; the
    launch's default (100) would let one address open only 132 connections per worker.
    (``python -m openenv_runtime.serve``; ``openenv serve`` loads the app the same way.)"""
    port = free_port()
    process = spawn_server("openenv_cli.bench.bench_env:app", port, workers=workers)
    try:
        refused = asyncio.run(_open_many(f"ws://127.0.0.1:{port}/ws", connections))
        assert refused == [], refused[:3]
    finally:
        stop_process(process)


async def _open_many(url: str, count: int) -> list[str]:
    """Open ``count`` WebSocket sessions from this address at once; the refusals' texts."""
    opened = await asyncio.gather(
        *(Connection.open(url, use_proxy=False) for _ in range(count)), return_exceptions=True
    )
    for connection in opened:
        if isinstance(connection, Connection):
            connection.abort()
    return [repr(x) for x in opened if not isinstance(x, Connection)]
