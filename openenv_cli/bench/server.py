"""Start and stop a server subprocess for a benchmark, and know its process ids.

``bench_server()`` runs the built-in benchmark environment with
``python -m openenv_runtime.serve`` on a free 127.0.0.1 port. The process leads its own
session (process group), so stopping it also ends any worker it started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil

from openenv_runtime.providers.base import wait_until_healthy
from openenv_runtime.testing import free_port

from . import procstat


class ServerStartError(RuntimeError):
    """The server did not become healthy (its log tail is in the message)."""


def pin_tree(roots: Sequence[int], cpus: Sequence[int]) -> None:
    """Pin every process (and thread) of the trees under ``roots`` to ``cpus``."""
    for pid in procstat.process_tree(roots):
        try:
            tids = [thread.id for thread in psutil.Process(pid).threads()]
        except psutil.Error:
            tids = [pid]
        for tid in tids:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, set(cpus))


class ServerProcess:
    """A server command run in its own process group, with its output in a temporary log file."""

    def __init__(
        self,
        argv: Sequence[str],
        port: int,
        *,
        env: dict[str, str] | None = None,
        cpus: Sequence[int] | None = None,
        name: str = "server",
        cwd: str | None = None,
    ) -> None:
        self.argv = list(argv)
        self.port = port
        self.env = env
        self.cpus = list(cpus) if cpus else None
        self.name = name
        self.cwd = cwd
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    @property
    def pids(self) -> list[int]:
        return [self.process.pid] if self.process is not None else []

    def start(self) -> None:
        fd, name = tempfile.mkstemp(prefix=f"openenv-bench-{self.name}-", suffix=".log")
        self.log_path = Path(name)
        try:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(self.env or {})},
                cwd=self.cwd,
                start_new_session=True,
            )
        finally:
            os.close(fd)
        if self.cpus:
            # Before the interpreter has started any worker, so workers inherit it.
            with contextlib.suppress(OSError):
                os.sched_setaffinity(self.process.pid, set(self.cpus))

    def log_tail(self, chars: int = 3000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]

    def wait_healthy(self, timeout: float = 60.0) -> dict[str, Any]:
        """Poll ``/health`` until it answers; raises :class:`ServerStartError` if the server exits or stalls."""
        process = self.process
        assert process is not None

        def exited() -> str | None:
            if process.poll() is None:
                return None
            return (
                f"the {self.name} server exited with code {process.returncode}:\n{self.log_tail()}"
            )

        try:
            health = wait_until_healthy(self.url, timeout, interval_s=0.1, alive=exited)
        except RuntimeError as exc:
            raise ServerStartError(str(exc)) from None
        except TimeoutError:
            raise ServerStartError(
                f"the {self.name} server did not answer {self.url}/health within {timeout:.0f}s:\n"
                f"{self.log_tail()}"
            ) from None
        if self.cpus:
            pin_tree(self.pids, self.cpus)  # workers started meanwhile, and their threads
        return health

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM the process group, then SIGKILL what is left; remove the log unless it failed."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        # Whatever is left of the group (workers included) goes now.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(5)
        if self.log_path is not None and os.environ.get("OPENENV_KEEP_SERVER_LOGS") != "1":
            with contextlib.suppress(OSError):
                self.log_path.unlink()

    def __enter__(self) -> ServerProcess:
        self.start()
        try:
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_command(app: str, port: int, workers: int = 1, app_dir: str | None = None) -> list[str]:
    """``python -m openenv_runtime.serve APP`` on 127.0.0.1:port."""
    argv = [
        sys.executable,
        "-m",
        "openenv_runtime.serve",
        app,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    if app_dir:
        argv += ["--app-dir", app_dir]
    return argv


BENCH_ENV = {"LOG_LEVEL": "warning", "ENABLE_WEB_INTERFACE": "false"}


def bench_server(
    *,
    workers: int = 1,
    sync: bool = False,
    cpus: Sequence[int] | None = None,
    port: int | None = None,
    env: dict[str, str] | None = None,
) -> ServerProcess:
    """The built-in benchmark environment (``openenv_cli.bench.bench_env:app`` or ``:sync_app``), not yet started."""
    port = port or free_port()
    app = "openenv_cli.bench.bench_env:sync_app" if sync else "openenv_cli.bench.bench_env:app"
    root = str(Path(__file__).resolve().parents[2])
    full_env = {
        **BENCH_ENV,
        "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
        **(env or {}),
    }
    return ServerProcess(
        serve_command(app, port, workers),
        port,
        env=full_env,
        cpus=cpus,
        name="bench-sync" if sync else "bench",
    )


@contextlib.contextmanager
def running(server: ServerProcess, timeout: float = 60.0) -> Iterator[ServerProcess]:
    """Start ``server``, wait until healthy, and always stop it."""
    server.start()
    try:
        server.wait_healthy(timeout)
        yield server
    finally:
        server.stop()
