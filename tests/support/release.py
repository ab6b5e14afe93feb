"""Release-test helpers: build both distributions, serve them from a local package index, and
drive fresh virtualenvs and CLI processes with bounded time.

The index is a real PEP 503 server (``pypiserver``) on 127.0.0.1 with fallback to PyPI
turned off, so only what was built here is served from it; everything else comes from the
normal registry, passed as the extra index.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from openenv_runtime.testing import free_port

REPO = Path(__file__).resolve().parents[2]
# What a user's pip talks to for everything that is not ours.
REGISTRY = os.environ.get("OPENENV_TEST_REGISTRY", "https://pypi.org/simple/")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def run(
    command: Sequence[str | Path],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> str:
    """Run ``command``; on failure raise with its output (the test log then says why)."""
    result = subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, command))} exited {result.returncode}\n"
            f"--- stdout ---\n{result.stdout[-6000:]}\n--- stderr ---\n{result.stderr[-6000:]}"
        )
    return result.stdout


def build_distributions(out: Path) -> list[Path]:
    """Wheels and sdists of openenv-runtime and openenv-toolkit (``python -m build``), checked
    by ``twine check --strict``."""
    for source in (REPO / "runtime", REPO):
        run([sys.executable, "-m", "build", "--outdir", out, source], timeout=600)
    built = sorted(out.iterdir())
    run([sys.executable, "-m", "twine", "check", "--strict", *built], timeout=120)
    return built


def wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def wait_http(url: str, timeout: float, process: subprocess.Popen[bytes] | None = None) -> bytes:
    """GET ``url`` until it answers 200 (or ``process`` exits, or time runs out)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(
                f"the process exited with {process.returncode} before {url} answered"
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                body: bytes = response.read()
                return body
        except (urllib.error.URLError, OSError) as exc:
            last = exc
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {timeout:.0f} s: {last}")


@contextlib.contextmanager
def background(
    command: Sequence[str | Path],
    *,
    log: Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """A process in its own session, output to ``log``, always stopped (SIGTERM, then SIGKILL)
    by its id."""
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(c) for c in command],
            cwd=cwd,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)


@contextlib.contextmanager
def package_index(folder: Path) -> Iterator[str]:
    """Serve the distributions in ``folder`` at ``http://127.0.0.1:PORT/simple/``."""
    server = shutil.which("pypi-server", path=str(Path(sys.executable).parent)) or shutil.which(
        "pypi-server"
    )
    if server is None:
        raise AssertionError("pypi-server is missing: pip install -e ./runtime -e '.[ci]'")
    port = free_port()
    command = [server, "run", "-i", "127.0.0.1", "-p", str(port), "--disable-fallback", folder]
    with background(command, log=folder.parent / "index.log") as process:
        url = f"http://127.0.0.1:{port}/simple/"
        wait_http(url, timeout=30, process=process)
        yield url


def fresh_venv(where: Path, python: str = sys.executable) -> Path:
    """A new virtualenv (no system site-packages); returns its bin folder."""
    run([python, "-m", "venv", where], timeout=120)
    return where / "bin"


def pip_env() -> dict[str, str]:
    """The environment for a user's pip: no inherited virtualenv, this repo not on the path."""
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env
