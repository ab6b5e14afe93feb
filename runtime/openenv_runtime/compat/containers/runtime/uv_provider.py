"""``UVProvider``: the reference's runtime provider that serves a project folder locally.

The reference launches ``uv run --isolated --project <path> -- uvicorn <app>``. Here the
server runs with :class:`~openenv_runtime.providers.ProcessProvider` in this interpreter, so
the project's dependencies must be installed in it (``pip install -e <path>``); no ``uv``
executable is needed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ....providers.base import wait_until_healthy
from ....providers.interfaces import RuntimeProvider
from ....providers.process import AppTarget, ProcessProvider, resolve_target

DEFAULT_APP = "server.app:app"


class UVProvider(RuntimeProvider):
    """Serve the project in ``project_path``: ``start()`` returns its URL, ``stop()`` ends it.

    Args:
        project_path: the project folder (default: the current folder, taken when made).
        app: the ASGI app's import path, imported from ``project_path``; left at the default,
            a folder with an ``openenv.yaml`` is served from its ``app:`` line instead.
        host: the interface to listen on (URLs use 127.0.0.1 for 0.0.0.0 and ::).
        reload: accepted for the reference's signature; the server does not reload on edits.
        env_vars: environment variables for the server (``start``'s own are added on top).
        context_timeout_s: seconds ``start()`` allows for ``/health`` to answer.
    """

    def __init__(
        self,
        *,
        project_path: str = ".",
        app: str = DEFAULT_APP,
        host: str = "0.0.0.0",
        reload: bool = False,
        env_vars: dict[str, str] | None = None,
        context_timeout_s: float = 60.0,
    ) -> None:
        self.project_path = os.path.abspath(project_path)
        self.app = app
        self.host = host
        self.reload = reload
        self.env_vars = env_vars
        self.context_timeout_s = context_timeout_s
        self._provider: ProcessProvider | None = None
        self._base_url: str | None = None

    def _target(self) -> AppTarget:
        folder = Path(self.project_path)
        if self.app == DEFAULT_APP and (folder / "openenv.yaml").is_file():
            return resolve_target(folder)
        return AppTarget(self.app, self.project_path, {})

    def start(
        self,
        port: int | None = None,
        env_vars: dict[str, str] | None = None,
        workers: int = 1,
        **_: Any,
    ) -> str:
        """Start the server and wait until ``/health`` answers; returns its base URL.

        Raises ``RuntimeError`` when it already runs or cannot start.
        """
        if self._provider is not None and self._provider.running:
            raise RuntimeError("UVProvider is already running")
        provider = ProcessProvider(
            self.app,
            workers=workers,
            host=self.host,
            port=port,
            env={**(self.env_vars or {}), **(env_vars or {})},
            startup_timeout=self.context_timeout_s,
        )
        provider.target = self._target()
        url = provider.start()[0]
        if self.host in ("0.0.0.0", "::"):
            url = "http://127.0.0.1:" + url.rsplit(":", 1)[1]
        self._provider, self._base_url = provider, url
        return url

    def wait_for_ready(self, timeout_s: float = 60.0) -> None:
        """Wait until ``/health`` answers; ``RuntimeError`` if the server is not running."""
        if self._provider is None or self._base_url is None:
            raise RuntimeError("UVProvider has not been started")
        if self._provider.processes and self._provider.processes[0].poll() is not None:
            code = self._provider.processes[0].returncode
            raise RuntimeError(f"the server process exited prematurely with code {code}")
        wait_until_healthy(self._base_url, timeout_s, "Server")

    def stop(self) -> None:
        provider, self._provider, self._base_url = self._provider, None, None
        if provider is not None:
            provider.stop()

    @property
    def base_url(self) -> str:
        """The running server's base URL; ``RuntimeError`` before ``start()``."""
        if self._base_url is None:
            raise RuntimeError("UVProvider has not been started")
        return self._base_url
