"""A real server for tests: ``running_server`` (a uvicorn in a thread) and ``free_port``."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from ..redaction import install_redaction


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now (the kernel's choice), for a server to bind.

    Another process may take it before yours binds it; prefer ``running_server``, which keeps
    the socket it found, where you can.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def running_server(
    app: Any, host: str = "127.0.0.1", timeout: float = 15.0, **uvicorn_options: Any
) -> Iterator[str]:
    """Serve ``app`` on a free port in a background thread; yields its base URL (``http://host:port``).

    A real uvicorn server on real sockets, stopped (sessions closed) when the block ends::

        with running_server(app) as url:
            with MyEnv(base_url=url).sync() as env:
                env.reset()
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    options = {**_settings_options(app), "log_level": "warning", **uvicorn_options}
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, **options))
    server.install_signal_handlers = lambda: None  # type: ignore[attr-defined]  # not the main thread (older uvicorn)
    thread = threading.Thread(
        target=lambda: asyncio.run(server.serve(sockets=[sock])),
        name="openenv-test-server",
        daemon=True,
    )
    install_redaction()
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the test server did not start within {timeout}s")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()


def _settings_options(app: Any) -> dict[str, Any]:
    """The protocol-level limits ``openenv serve`` would apply to ``app`` (message size, ...)."""
    from ..serve import uvicorn_options
    from ..server.config.settings import app_settings

    resolved = app_settings(app)
    if resolved is None:
        return {"ws_per_message_deflate": False}
    return uvicorn_options(resolved.values)
