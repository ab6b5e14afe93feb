"""The reference implementations in virtualenvs of their own.

Wire-compatibility tests and benchmarks need the real reference server and client, but
the reference must never land in the interpreter that runs our tests. This module
builds (once, cached, under a file lock) a virtualenv per pinned reference and runs the
scripts in ``ref_scripts/`` with that virtualenv's python. Two references are pinned:
``openenv-core`` 0.3.0 (:func:`reference_python`) and its successor ``openenv`` 0.10.0
(:func:`openenv_python`, import ``openenv.core``; it pulls Gradio and fastmcp).

    python -m tests.support.reference      # pre-build both virtualenvs (prints their pythons)

The cache lives in ``$OPENENV_TEST_CACHE`` (default ``~/.cache/openenv-tests``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from openenv_runtime.providers.base import wait_until_healthy as providers_wait
from openenv_runtime.testing import free_port

REFERENCE_VERSION = "0.3.0"
REFERENCE_REQUIREMENT = f"openenv-core=={REFERENCE_VERSION}"
# The successor distribution: package ``openenv`` (same import root ``openenv.core``).
OPENENV_VERSION = "0.10.0"
OPENENV_REQUIREMENT = f"openenv=={OPENENV_VERSION}"

SCRIPTS_DIR = Path(__file__).resolve().parent / "ref_scripts"
SERVER_SCRIPT = SCRIPTS_DIR / "ref_echo_server.py"
CLIENT_SCRIPT = SCRIPTS_DIR / "ref_client_episode.py"

# Upper bounds, so that a hung index or a wedged server fails a test instead of CI.
BUILD_TIMEOUT_S = float(os.environ.get("OPENENV_REF_BUILD_TIMEOUT", "900"))
LOCK_TIMEOUT_S = BUILD_TIMEOUT_S + 120
_COMPLETE_MARKER = ".openenv-complete"


class ReferenceHarnessError(RuntimeError):
    """The reference virtualenv, server or client could not be used."""


def cache_dir() -> Path:
    root = os.environ.get("OPENENV_TEST_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "openenv-tests"


def venv_dir(distribution: str = "openenv-core", version: str = REFERENCE_VERSION) -> Path:
    return cache_dir() / f"{distribution}-{version}"


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _is_healthy(
    venv: Path, distribution: str = "openenv-core", version: str = REFERENCE_VERSION
) -> bool:
    python = _venv_python(venv)
    if not (venv / _COMPLETE_MARKER).is_file() or not python.exists():
        return False
    # Cheap on purpose (importing openenv itself takes seconds): the distribution's
    # version, and that every module the scripts import can be found.
    probe = (
        "import importlib.metadata as m, importlib.util as u; "
        f"assert m.version({distribution!r}) == {version!r}; "
        "import os; root = os.path.dirname(u.find_spec('openenv').origin); "
        "assert os.path.isfile(os.path.join(root, 'core', 'env_client.py')); "
        "assert os.path.isfile(os.path.join(root, 'core', 'env_server', 'http_server.py')); "
        "assert all(u.find_spec(x) for x in ('uvicorn', 'websockets', 'fastapi'))"
    )
    try:
        result = subprocess.run([str(python), "-c", probe], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


@contextlib.contextmanager
def file_lock(path: Path, timeout_s: float) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ReferenceHarnessError(
                        f"timed out after {timeout_s:.0f}s waiting for the lock {path} "
                        "(another process is building the reference virtualenv)"
                    ) from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _run_step(cmd: Sequence[str], log: Path, deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ReferenceHarnessError(
            f"building the reference virtualenv exceeded {BUILD_TIMEOUT_S:.0f}s"
        )
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    with open(log, "a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        try:
            result = subprocess.run(
                list(cmd), stdout=out, stderr=subprocess.STDOUT, env=env, timeout=remaining
            )
        except subprocess.TimeoutExpired:
            raise ReferenceHarnessError(
                f"building the reference virtualenv exceeded {BUILD_TIMEOUT_S:.0f}s; see {log}"
            ) from None
    if result.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:])
        raise ReferenceHarnessError(f"`{' '.join(cmd)}` failed (exit {result.returncode}):\n{tail}")


def _build(venv: Path, requirement: str = REFERENCE_REQUIREMENT) -> None:
    if venv.exists():
        shutil.rmtree(venv)
    log = venv.parent / f"{venv.name}.build.log"
    log.write_text("")
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    _run_step([sys.executable, "-m", "venv", str(venv)], log, deadline)
    python = str(_venv_python(venv))
    _run_step([python, "-m", "pip", "install", "--quiet", requirement], log, deadline)
    (venv / _COMPLETE_MARKER).write_text(f"{requirement}\n")


_cached_pythons: dict[str, Path] = {}


def _pinned_python(distribution: str, version: str) -> Path:
    requirement = f"{distribution}=={version}"
    cached = _cached_pythons.get(requirement)
    if cached is not None:
        return cached
    venv = venv_dir(distribution, version)
    with file_lock(venv.parent / f"{venv.name}.lock", LOCK_TIMEOUT_S):
        if not _is_healthy(venv, distribution, version):
            _build(venv, requirement)
            if not _is_healthy(venv, distribution, version):
                raise ReferenceHarnessError(
                    f"the freshly built reference virtualenv {venv} is unusable"
                )
    _cached_pythons[requirement] = _venv_python(venv)
    return _cached_pythons[requirement]


def reference_python() -> Path:
    """The python of a virtualenv holding ``openenv-core==0.3.0``; built on first use.

    Safe to call from parallel processes (file lock). A virtualenv that is incomplete or
    broken is deleted and rebuilt. The first build takes about a minute.
    """
    return _pinned_python("openenv-core", REFERENCE_VERSION)


def openenv_python() -> Path:
    """The python of a virtualenv holding ``openenv==0.10.0`` (import ``openenv.core``).

    Cached in ``openenv-0.10.0`` beside the 0.3.0 one, under its own file lock; the first
    build downloads Gradio and fastmcp (a few minutes).
    """
    return _pinned_python("openenv", OPENENV_VERSION)


# --- servers -----------------------------------------------------------------------


def start_reference_server(
    port: int,
    *,
    env: str = "echo",
    max_concurrent_envs: int = 1,
    workers: int = 1,
    metadata: bool = False,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``ref_echo_server.py`` on 127.0.0.1:port with the reference's own server.

    ``env`` is ``"echo"`` or ``"bench"``; ``metadata=True`` makes the echo environment put
    a ``metadata`` dict in its step observations. Output goes to a log file whose path is
    the ``log_path`` attribute of the returned process. Pair with
    :func:`wait_until_healthy` and :func:`stop_server` (or use :func:`reference_server`).
    """
    log_fd, log_name = tempfile.mkstemp(prefix=f"ref-server-{port}-", suffix=".log")
    cmd = [
        str(reference_python()),
        str(SERVER_SCRIPT),
        "--port",
        str(port),
        "--env",
        env,
        "--max-concurrent-envs",
        str(max_concurrent_envs),
        "--workers",
        str(workers),
    ]
    if metadata:
        cmd.append("--metadata")
    proc_env = dict(os.environ, PYTHONUNBUFFERED="1", **(extra_env or {}))
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=subprocess.STDOUT,
            env=proc_env,
            start_new_session=True,  # so stop_server can also end uvicorn's workers
        )
    finally:
        os.close(log_fd)
    proc.log_path = Path(log_name)  # type: ignore[attr-defined]
    proc.url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    return proc


def server_log(proc: subprocess.Popen[bytes]) -> str:
    path = getattr(proc, "log_path", None)
    if path is None or not Path(path).exists():
        return ""
    return Path(path).read_text(errors="replace")


def wait_until_healthy(
    url: str, proc: subprocess.Popen[bytes] | None = None, timeout: float = 60.0
) -> None:
    """Poll ``GET {url}/health`` until it answers 200; fail fast if ``proc`` exits."""

    def alive() -> str | None:
        if proc is None or proc.poll() is None:
            return None
        return (
            f"server exited with code {proc.returncode} before becoming healthy:\n"
            + server_log(proc)[-4000:]
        )

    try:
        providers_wait(url.rstrip("/"), timeout, alive=alive)
    except (RuntimeError, TimeoutError) as exc:
        log = server_log(proc)[-4000:] if proc is not None and isinstance(exc, TimeoutError) else ""
        raise ReferenceHarnessError(f"{exc}\n{log}".rstrip()) from None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_server(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Stop a server started by :func:`start_reference_server` (and its workers)."""
    # The server runs in a process group of its own (start_new_session=True): signal the
    # group, so uvicorn's worker processes and multiprocessing helpers end with it.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _group_alive(proc.pid):
        proc.poll()  # reap the leader so it does not linger as a zombie
        time.sleep(0.05)
    if _group_alive(proc.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=timeout)
    path = getattr(proc, "log_path", None)
    if path is not None and os.environ.get("OPENENV_KEEP_SERVER_LOGS") != "1":
        with contextlib.suppress(OSError):
            Path(path).unlink()


@contextlib.contextmanager
def reference_server(
    *, port: int | None = None, timeout: float = 60.0, **kwargs: Any
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """Run a healthy reference server for the ``with`` block; yields ``(proc, url)``."""
    port = port or free_port()
    proc = start_reference_server(port, **kwargs)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_healthy(url, proc, timeout=timeout)
        yield proc, url
    finally:
        stop_server(proc)


# --- client ------------------------------------------------------------------------


def run_reference_client(
    url: str,
    *,
    mode: str = "sync",
    args: Sequence[str] = (),
    timeout: float = 120.0,
    script: Path = CLIENT_SCRIPT,
) -> dict[str, Any]:
    """Run ``ref_client_episode.py URL`` with the reference's client; return its JSON.

    ``mode`` is ``"sync"`` (the ``.sync()`` wrapper) or ``"async"``. Raises
    :class:`ReferenceHarnessError` with the script's output when it fails.
    """
    cmd = [str(reference_python()), str(script), url, "--mode", mode, *args]
    try:
        result = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as exc:
        raise ReferenceHarnessError(
            f"reference client timed out after {timeout:.0f}s: {exc.stderr}"
        ) from None
    if result.returncode != 0:
        raise ReferenceHarnessError(
            f"reference client exited {result.returncode}\nstdout:\n{result.stdout}\n"
            f"stderr:\n{result.stderr}"
        )
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError:
        raise ReferenceHarnessError(
            f"reference client printed no JSON document:\n{result.stdout}\n{result.stderr}"
        ) from None


if __name__ == "__main__":
    started = time.monotonic()
    print(reference_python())
    print(openenv_python())
    print(f"ready in {time.monotonic() - started:.1f}s", file=sys.stderr)
