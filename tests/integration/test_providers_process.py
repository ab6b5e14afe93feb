"""ProcessProvider and EnvClient.from_project with real server processes, and what is left after
errors, Ctrl-C, SIGTERM and interpreter exit (counted in /proc, never assumed)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from openenv_runtime import EnvClient, State
from openenv_runtime.providers import ProcessProvider, ProviderError
from openenv_runtime.providers.base import health
from tests.fixtures.echo import EchoAction, EchoObservation
from tests.support.servers import wait_until

ECHO_APP = "tests.fixtures.echo_app:app"
ROOT = Path(__file__).resolve().parents[2]


class Echo(EnvClient[EchoAction, EchoObservation, State]):
    pass


def processes_with(marker: str) -> list[int]:
    """Pids of servers whose command line contains ``marker`` (this test's own, by construction)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        if (
            marker.encode() in cmdline
            and b"openenv_runtime.serve" in cmdline
            and "State:\tZ" not in status
        ):
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status


def slow_app(tmp_path: Path, delay: float = 60.0) -> tuple[str, str]:
    """A module whose import sleeps (a server that never gets healthy in time); unique name."""
    name = f"slow_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            f"""
            import time
            time.sleep({delay})
            from tests.fixtures.echo_app import app
            """
        )
    )
    return f"{name}:app", name


def child_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}


def test_replicas_serve_and_stop() -> None:
    provider = ProcessProvider(ECHO_APP, replicas=2, env={"MAX_CONCURRENT_ENVS": "3"})
    with provider as urls:
        assert len(urls) == 2 and len(set(urls)) == 2
        pids = provider.pids
        for url in urls:
            answer = health(url)
            assert answer is not None and answer["max_sessions"] == 3
        with Echo(urls[1]).sync() as env:
            assert env.step(EchoAction(message="hey")).observation.echoed_message == "hey"
    assert not provider.running and provider.urls == []
    assert wait_until(lambda: not any(alive(p) for p in pids), timeout=10)
    provider.stop()  # idempotent


def test_workers_per_replica() -> None:
    with ProcessProvider(ECHO_APP, workers=2) as urls:
        assert health(urls[0]) is not None


def test_async_context_manager() -> None:
    async def run() -> list[int]:
        provider = ProcessProvider(ECHO_APP)
        async with provider as urls:
            async with Echo(urls[0]) as env:
                await env.reset()
            return provider.pids

    pids = asyncio.run(run())
    assert wait_until(lambda: not any(alive(p) for p in pids), timeout=10)


def test_app_that_fails_shows_its_output(tmp_path: Path) -> None:
    (tmp_path / "broken_app.py").write_text(
        "raise RuntimeError('the env is broken: missing key')\n"
    )
    provider = ProcessProvider(
        "broken_app:app", env={"PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    )
    with pytest.raises(ProviderError) as info:
        provider.start()
    message = str(info.value)
    assert "exited with code" in message and "the env is broken: missing key" in message
    assert not provider.running


def test_port_taken_is_named() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(ProviderError, match=rf"port {port} is taken \(pass another port="):
            ProcessProvider(ECHO_APP, port=port).start()


def test_startup_timeout_stops_the_server(tmp_path: Path) -> None:
    app, marker = slow_app(tmp_path)
    provider = ProcessProvider(app, env=child_env(tmp_path), startup_timeout=1.5)
    with pytest.raises(ProviderError, match=r"did not answer /health within 1\.5s"):
        provider.start()
    assert wait_until(lambda: not processes_with(marker), timeout=15)


def test_from_project_sync_async_and_inside_a_loop() -> None:
    with Echo.from_project(ECHO_APP).sync() as env:
        url = env.client.base_url
        assert env.reset().observation.echoed_message == "ready"
    assert wait_until(lambda: health(url, timeout=0.5) is None, timeout=10)  # closing stopped it

    async def in_async_code() -> str:
        env = await Echo.from_project(ECHO_APP)  # awaiting connects, as the reference's users write
        try:
            return (await env.step(EchoAction(message="a"))).observation.echoed_message
        finally:
            await env.close()

    assert asyncio.run(in_async_code()) == "a"

    async def blocking_calls_inside_a_running_loop() -> float | None:
        with Echo.from_project(ECHO_APP).sync() as env:
            return env.step(EchoAction(message="abc")).reward

    assert asyncio.run(blocking_calls_inside_a_running_loop()) == pytest.approx(0.3)


def test_from_project_folder(tmp_path: Path) -> None:
    project = tmp_path / "fixtures_project"
    project.mkdir()
    (project / "openenv.yaml").write_text(f"app: {ECHO_APP}\nserver:\n  max_concurrent_envs: 5\n")
    env = Echo.from_project(project)
    try:
        answer = health(env.base_url)
        assert answer is not None and answer["max_sessions"] == 5
    finally:
        env.sync().close()


# -- nothing left running: interpreter exit, SIGTERM, Ctrl-C ----------------------------------

CHILD = textwrap.dedent(
    """
    import sys, time
    from openenv_runtime.providers import ProcessProvider
    provider = ProcessProvider(sys.argv[1])
    {body}
    """
)


def run_child(tmp_path: Path, body: str, app: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD.format(body=textwrap.indent(body, "").strip()), app],
        env=child_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_interpreter_exit_stops_servers(tmp_path: Path) -> None:
    child = run_child(tmp_path, "provider.start(); print(provider.pids[0], flush=True)", ECHO_APP)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    pid = int(out.split()[0])
    assert wait_until(lambda: not alive(pid), timeout=15)


def test_sigterm_stops_servers(tmp_path: Path) -> None:
    child = run_child(
        tmp_path, "provider.start(); print(provider.pids[0], flush=True); time.sleep(60)", ECHO_APP
    )
    try:
        assert child.stdout is not None
        pid = int(child.stdout.readline())
        assert alive(pid)
        child.send_signal(signal.SIGTERM)
        child.wait(30)
        assert wait_until(lambda: not alive(pid), timeout=15)
    finally:
        child.kill()
        child.wait()


def test_ctrl_c_during_start_leaves_nothing(tmp_path: Path) -> None:
    app, marker = slow_app(tmp_path)
    child = run_child(tmp_path, "provider.start()", app)
    try:
        # The server process exists (importing its slow app) while start() waits for /health.
        assert wait_until(lambda: bool(processes_with(marker + ":app")), timeout=30)
        time.sleep(0.5)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
        assert "KeyboardInterrupt" in err
        assert wait_until(lambda: not processes_with(marker + ":app"), timeout=15)
    finally:
        child.kill()
        child.wait()
