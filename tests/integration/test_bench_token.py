"""``openenv bench`` against a real server started with ``OPENENV_API_KEY``.

With the token (from the environment) every mode, transport and client measures; without it,
or with a wrong one, one clear error says to set it. The token never shows: not in the
console, not in a report file, not in the argv of a load-generator worker or of the server
``--serve`` starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from openenv_cli.bench.auth import is_auth_refusal
from openenv_cli.bench.loadgen import LoadGenerator
from openenv_cli.bench.runner import BenchSettings, run_bench
from openenv_runtime.testing import free_port
from tests.support.servers import REPO, server_process

SECRET = "bench-secret-d41d8cd98f00b204"
APP = "openenv_cli.bench.bench_env:app"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    port = free_port()
    with server_process(APP, port, OPENENV_API_KEY=SECRET):
        yield f"http://127.0.0.1:{port}"


def bench_env(token: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENENV_API_KEY"}
    if token is not None:
        env["OPENENV_API_KEY"] = token
    return env


def bench(*args: str, token: str | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openenv_cli.main", "bench", *args],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
        env=bench_env(token),
    )


def assert_nowhere(out: Path, result: subprocess.CompletedProcess[str]) -> None:
    assert SECRET not in result.stdout and SECRET not in result.stderr
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


WORKLOADS = {
    "sessions": ("--mode", "sessions", "--requests-grid", "4,8", "--wait-grid", "0"),
    "throughput": ("--mode", "throughput", "--sessions", "4", "--steps", "25"),
}
CHANNELS = {
    "ws-lean": ("--transport", "ws", "--client", "lean"),
    "ws-websockets": ("--transport", "ws", "--client", "websockets"),
    "http": ("--transport", "http"),
}


@pytest.mark.parametrize("channel", list(CHANNELS))
@pytest.mark.parametrize("mode", list(WORKLOADS))
def test_measures_with_the_token_from_the_environment(
    url: str, tmp_path: Path, mode: str, channel: str
) -> None:
    plots = "--plots" if (mode, channel) == ("sessions", "http") else "--no-plots"
    args = ("--url", url, *WORKLOADS[mode], *CHANNELS[channel], "--reps", "1", plots)
    result = bench(*args, "--processes", "2", "--output-dir", str(tmp_path), token=SECRET)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(next(tmp_path.glob(f"bench-{mode}-*.json")).read_text())
    cells = data["sessions"] if mode == "sessions" else data["throughput"]
    assert cells and all(c["errors"] == {} for c in cells)
    if mode == "sessions":
        assert [(c["batch"], c["ok"]) for c in cells] == [(4, 4), (8, 8)]
    else:
        assert cells[0]["steps"] == 100
    assert data["settings"]["token"] is True  # that one was sent, not what it was
    if plots == "--plots":
        assert list(tmp_path.glob("*.png"))
    assert_nowhere(tmp_path, result)


@pytest.mark.parametrize("channel", ["ws-lean", "http"])
def test_without_the_token_it_says_to_set_it(url: str, tmp_path: Path, channel: str) -> None:
    args = ("--url", url, *WORKLOADS["sessions"], *CHANNELS[channel], "--reps", "1")
    result = bench(*args, "--output-dir", str(tmp_path), token=None)
    assert result.returncode == 1
    out = result.stdout + result.stderr
    assert "requires an access token" in out and "export OPENENV_API_KEY=" in out
    assert "Traceback" not in out and "success" not in out  # no run was attempted
    assert not list(tmp_path.iterdir())


def test_a_wrong_token_is_refused_without_showing_it(url: str, tmp_path: Path) -> None:
    wrong = SECRET[::-1]
    args = ("--url", url, *WORKLOADS["throughput"], "--action", '{"wait": 0}')
    result = bench(*args, "--output-dir", str(tmp_path), token=wrong)
    assert result.returncode == 1
    out = result.stdout + result.stderr
    assert "refused the token from OPENENV_API_KEY" in out and wrong not in out


@pytest.mark.parametrize("channel", list(CHANNELS))
def test_refused_runs_stop_with_an_auth_failure(url: str, channel: str) -> None:
    """Past the /schema check (e.g. a server that guards only /ws): the runs themselves stop."""
    transport, client = ("http", "lean") if channel == "http" else ("ws", channel[3:])
    settings = BenchSettings(
        url=url,
        transport=transport,
        client=client,
        requests_grid=[4, 8],
        wait_grid=[0.0],
        reps=1,
        settle=0,
        token="not-the-key",
    )
    run = run_bench(settings)
    assert len(run.sessions) == 1  # stopped after the first run
    assert run.unauthorized is not None and is_auth_refusal(run.unauthorized)
    assert "not-the-key" not in json.dumps(run.settings)


def test_worker_argv_never_holds_the_token(url: str) -> None:
    settings = BenchSettings(url=url, requests_grid=[4], wait_grid=[0.0], reps=1, token=SECRET)
    with LoadGenerator(2) as generator:
        assert len(generator.pids) == 2
        run = run_bench(settings, loadgen=generator)
        for pid in generator.pids:  # still running: their argv as ps shows it
            assert SECRET.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert run.sessions[0].ok == 4


def test_serve_with_the_flag_keeps_it_out_of_every_child_argv(tmp_path: Path) -> None:
    """``--serve --token``: the server gets it in its environment, the workers over their pipe."""
    args = ("--serve", *WORKLOADS["throughput"], "--steps", "3000", "--reps", "1", "--no-plots")
    process = subprocess.Popen(
        [sys.executable, "-m", "openenv_cli.main", "bench", *args, "--token", SECRET],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
        env={**bench_env(None), "PYTHONPATH": str(REPO)},
    )
    seen: set[tuple[str, ...]] = set()
    parent = psutil.Process(process.pid)
    own = parent.cmdline()  # the parent's argv holds --token (on purpose, in this test)
    while process.poll() is None:
        try:
            children = parent.children(recursive=True)
        except psutil.NoSuchProcess:
            break
        for child in children:
            try:
                cmdline = child.cmdline()
                # a child between fork and exec still shows the parent's argv; a zombie shows none
                if cmdline and cmdline != own:
                    seen.add(tuple(cmdline))
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
    output = process.communicate(timeout=180)[0]
    assert process.returncode == 0, output
    assert SECRET not in output
    commands = [" ".join(cmdline) for cmdline in seen]
    assert any("openenv_cli.bench.worker" in c for c in commands), commands
    assert any("openenv_runtime.serve" in c for c in commands), commands
    assert all(SECRET not in c for c in commands)
    assert_nowhere(tmp_path, subprocess.CompletedProcess([], 0, output, ""))
