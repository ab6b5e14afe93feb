"""Helpers for the `openenv deploy` tests: the engines they need, real servers, episodes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from openenv_runtime.client.generic import GenericEnvClient
from tests.support.docker_engine import in_ci
from tests.support.optional import reason
from tests.support.servers import SOURCES, get_json, server_process, stop_process

__all__ = ["server_process"]  # re-exported: the deploy tests start servers through here

REPO = Path(__file__).resolve().parents[2]
# What the CLI reads; the developer's shell must not change what the tests render.
CLI_ENV = (
    "PORT",
    "WORKERS",
    "MAX_CONCURRENT_ENVS",
    "SESSION_TIMEOUT",
    "DRAIN_TIMEOUT",
    "OPENENV_API_KEY",
    "OPENENV_IMAGE_TAG",
    "OPENENV_BASE_IMAGE",
    "OPENENV_ENVOY_IMAGE",
    "OPENENV_DEPLOY_REPLICAS",
    "OPENENV_DEPLOY_PORT",
    "OPENENV_DEPLOY_TOKEN",
)


def missing(what: str, how: str) -> None:
    """Fail (CI) or skip (elsewhere): ``what`` is not available; ``how`` gets it."""
    message = f"{what} is not available here; {how}"
    if in_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def tool(name: str, how: str) -> str:
    """The path of the executable ``name`` (beside this Python first), or fail/skip."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        missing(f"`{name}`", how)
    assert found is not None
    return found


def envoy_bin() -> str:
    return tool("envoy", reason("envoy"))


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLI_ENV}
    env.update(PYTHONUNBUFFERED="1", COLUMNS="1000", **extra)
    return env


def openenv(
    *args: str, cwd: Path, timeout: float = 300, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "openenv_cli.main", *args],
        cwd=cwd,
        env=cli_env(PYTHONPATH=SOURCES, **env),  # this checkout's runtime too
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def envoy_validate(path: Path) -> str:
    """Envoy's own validate mode on ``path``; returns its output (asserts success, no deprecations)."""
    done = subprocess.run(
        [envoy_bin(), "--mode", "validate", "-c", str(path), "--log-level", "warn"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "OK" in output, f"{path}: {output}"
    assert "Deprecated" not in output, output
    return output


def healthy(url: str) -> bool:
    try:
        return get_json(url + "/health")[0] == 200
    except OSError:
        return False


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@contextmanager
def envoy_process(config: Path, front: str) -> Iterator[subprocess.Popen[bytes]]:
    """Envoy with ``config``; stopped by its pid at the end."""
    process = subprocess.Popen(
        [envoy_bin(), "-c", str(config), "--log-level", "warn", "--use-dynamic-base-id"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: healthy(front) or process.poll() is not None, 30, "Envoy's front")
        assert process.poll() is None, "Envoy exited"
        yield process
    finally:
        stop(process)


stop = stop_process


def episode(url: str, message: str = "hello", token: str | None = None) -> float:
    """reset, step, close through ``url``; returns the step's reward."""
    with GenericEnvClient(base_url=url, token=token).sync() as env:
        env.reset()
        result = env.step({"message": message})
        assert result.observation["echoed_message"] == message
        return float(result.reward or 0.0)
