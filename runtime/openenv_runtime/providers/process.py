"""``ProcessProvider``: replicas as local ``python -m openenv_runtime.serve`` processes on free ports."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .base import Provider, ProviderError, last_lines

_PR_SET_PDEATHSIG = 1
_FAMILY_TARGET = re.compile(r"[a-z][a-z_]*:[^\s]+")  # FAMILY:NAME[?query]; the server checks it
_APP_LINE = re.compile(r"^app:\s*['\"]?([\w.]+:[\w.]+)['\"]?\s*(?:#.*)?$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class AppTarget:
    """What to serve: an import path, the folder to import it from, and project settings."""

    app: str
    app_dir: str | None
    env: Mapping[str, str]


def resolve_target(target: str | os.PathLike[str]) -> AppTarget:
    """A project folder (with ``openenv.yaml``), a ``module:attribute`` import path, or a
    family target ``FAMILY:NAME[?key=value&...]`` (``gymnasium:CartPole-v1``), which the
    server itself checks and builds (``openenv_runtime.adapters``)."""
    path = Path(target)
    if path.is_dir():
        manifest = path / "openenv.yaml"
        if not manifest.is_file():
            raise ProviderError(
                f"{path} has no openenv.yaml; pass a project folder made by `openenv init`, "
                "or an app import path such as my_env.server.app:app"
            )
        settings = _manifest(manifest.read_text(encoding="utf-8"))
        app = settings.get("app")
        if not isinstance(app, str) or ":" not in app:
            raise ProviderError(f"{manifest} has no `app: module:attribute` line")
        server = settings.get("server") if isinstance(settings.get("server"), dict) else {}
        env: dict[str, str] = {}
        if isinstance(server, dict):
            for key, var in (
                ("max_concurrent_envs", "MAX_CONCURRENT_ENVS"),
                ("session_timeout", "SESSION_TIMEOUT"),
            ):
                if server.get(key) is not None:
                    env[var] = str(server[key])
        # Generated apps are `<name>.server.app:app`, imported from the project's parent folder.
        return AppTarget(app, str(path.resolve().parent), env)
    text = str(target)
    if re.fullmatch(r"[\w.]+:[\w.]+", text) or _FAMILY_TARGET.fullmatch(text):
        return AppTarget(text, None, {})
    raise ProviderError(
        f"{text!r} is neither a project folder, an import path like my_env.server.app:app, "
        "nor a family target like gymnasium:CartPole-v1"
    )


def _manifest(text: str) -> dict[str, Any]:
    try:
        # PyYAML comes with the CLI; the runtime only needs the `app:` line without it
        from ..bounded_yaml import YamlRefused, load_bounded
    except ImportError:
        match = _APP_LINE.search(text)
        return {"app": match.group(1)} if match else {}
    try:
        loaded = load_bounded(text)  # size, depth and aliases bounded
    except YamlRefused as exc:
        raise ProviderError(f"openenv.yaml is refused: {exc}") from None
    return loaded if isinstance(loaded, dict) else {}


def free_port(host: str = "127.0.0.1") -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child, before exec: receive SIGTERM when the parent dies, even by SIGKILL."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class ProcessProvider(Provider):
    """Serve an environment in local processes: ``replicas`` servers of ``workers`` workers each.

    Args:
        target: a project folder (``openenv.yaml``) or an app import path (``module:app``).
        replicas: servers to start, each on its own free port.
        workers: worker processes per server (they share its port).
        host: interface to listen on.
        port: the first replica's port (the next ones count up); default: free ports.
        env: extra environment variables for the servers (e.g. ``MAX_CONCURRENT_ENVS``).
        python: the interpreter to run them with (default: this one).
        startup_timeout: seconds allowed for every ``/health`` to answer.
    """

    def __init__(
        self,
        target: str | os.PathLike[str],
        *,
        replicas: int = 1,
        workers: int = 1,
        host: str = "127.0.0.1",
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        python: str | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        super().__init__()
        if replicas < 1 or workers < 1:
            raise ProviderError("replicas and workers must be at least 1")
        self.target = resolve_target(target)
        self.replicas = replicas
        self.workers = workers
        self.host = host
        self.port = port
        self.env = dict(env or {})
        self.python = python or sys.executable
        self.startup_timeout = startup_timeout
        self.processes: list[subprocess.Popen[bytes]] = []
        self._logs: list[IO[bytes]] = []

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def _launch(self) -> list[str]:
        env = {**os.environ, **self.target.env, **self.env, "PYTHONUNBUFFERED": "1"}
        if self.target.app_dir:
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (self.target.app_dir, env.get("PYTHONPATH", "")) if p
            )
        in_main = threading.current_thread() is threading.main_thread()
        urls = []
        for index in range(self.replicas):
            port = self.port + index if self.port is not None else free_port(self.host)
            command = [self.python, "-m", "openenv_runtime.serve", self.target.app]
            command += ["--host", self.host, "--port", str(port), "--workers", str(self.workers)]
            if self.target.app_dir:
                command += ["--app-dir", self.target.app_dir]
            log = tempfile.TemporaryFile(prefix="openenv-provider-")  # noqa: SIM115 (closed in _teardown)
            self._logs.append(log)
            self.processes.append(
                subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    # Own process group: stopped as a whole, and a terminal's Ctrl-C reaches
                    # only us (we stop them in order). PDEATHSIG is tied to the forking
                    # thread, so it is only set from the main thread.
                    start_new_session=True,
                    preexec_fn=_die_with_parent if in_main else None,
                )
            )
            host = f"[{self.host}]" if ":" in self.host else self.host
            urls.append(f"http://{host}:{port}")
        return urls

    def log(self, index: int) -> str:
        """What replica ``index`` printed so far."""
        handle = self._logs[index]
        handle.flush()
        handle.seek(0)
        return handle.read().decode("utf-8", "replace")

    def _check_alive(self, index: int) -> str | None:
        code = self.processes[index].poll()
        if code is None:
            return None
        output = self.log(index)
        port = self.urls[index].rsplit(":", 1)[-1]
        if "address already in use" in output.lower():
            fix = (
                "pass another port= or leave it out to use free ports"
                if self.port is not None
                else "another program took it meanwhile; try again"
            )
            return f"port {port} is taken ({fix})"
        return (
            f"the server for {self.target.app} (replica {index}) exited with code {code} "
            f"before answering /health; its last lines:\n{last_lines(output)}"
        )

    def _teardown(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)
            # Workers of a killed supervisor could outlive it: end the whole group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        for log in self._logs:
            log.close()
        self.processes = []
        self._logs = []
