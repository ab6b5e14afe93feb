"""Run an environment app on uvicorn, tuned for many long-lived WebSocket sessions.

``python -m openenv_runtime.serve my_env.server.app:app`` is what container images run.
Settings come from parameters, else environment variables: ``HOST`` (127.0.0.1), ``PORT``
(8000), ``WORKERS`` (1), ``WS_PING_INTERVAL`` / ``WS_PING_TIMEOUT`` (20 s each; keepalive
pings are answered by the protocol layer even while a long step runs), ``LOG_LEVEL``
(info). ``MAX_CONCURRENT_ENVS``, ``SESSION_TIMEOUT``, ``ENABLE_WEB_INTERFACE`` and
``OPENENV_API_KEY`` are read by ``create_app`` in every worker.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import resource
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, replace
from types import FrameType

import uvicorn

from .server import drain
from .server.lifecycle import DEFAULT_DRAIN_TIMEOUT


@dataclass(frozen=True, slots=True)
class ServeSettings:
    app: str
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    reload: bool = False
    ws_ping_interval: float | None = 20.0
    ws_ping_timeout: float | None = 20.0
    log_level: str = "info"
    app_dir: str | None = None
    reload_dirs: tuple[str, ...] = ()
    backlog: int = 4096


def raise_open_file_limit() -> tuple[int, int]:
    """Raise the soft limit on open files to the hard limit; returns the new (soft, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft, hard


def _float_or_none(raw: str | None, default: float | None) -> float | None:
    if raw in (None, ""):
        return default
    value = float(raw)  # type: ignore[arg-type]
    return None if value <= 0 else value


def settings_from_env(app: str, **overrides: object) -> ServeSettings:
    """Settings for ``app`` from the environment, with explicit ``overrides`` taking precedence."""
    env = os.environ
    values: dict[str, object] = {
        "app": app,
        "host": env.get("HOST") or "127.0.0.1",
        "port": int(env.get("PORT") or 8000),
        "workers": int(env.get("WORKERS") or 1),
        "ws_ping_interval": _float_or_none(env.get("WS_PING_INTERVAL"), 20.0),
        "ws_ping_timeout": _float_or_none(env.get("WS_PING_TIMEOUT"), 20.0),
        "log_level": (env.get("LOG_LEVEL") or "info").lower(),
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    return ServeSettings(**values)  # type: ignore[arg-type]


def _env_seconds(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name) or default)
    except ValueError:
        return default


def _uvicorn_config(settings: ServeSettings) -> uvicorn.Config:
    return uvicorn.Config(
        settings.app,
        host=settings.host,
        port=settings.port,
        reload=settings.reload,
        reload_dirs=list(settings.reload_dirs) or None,
        log_level=settings.log_level,
        ws_ping_interval=settings.ws_ping_interval,
        ws_ping_timeout=settings.ws_ping_timeout,
        # Compression costs CPU and a third of each idle session's memory for small JSON frames.
        ws_per_message_deflate=False,
        # The app enforces its own, smaller limit with a clear error; this is the hard ceiling.
        ws_max_size=64 << 20,
        backlog=settings.backlog,
        timeout_graceful_shutdown=5,  # after a drain, only steps that never return are left
        proxy_headers=True,
        forwarded_allow_ips="*",
    )


def _loaded(config: uvicorn.Config) -> uvicorn.Config:
    """Import the app now, then keep the garbage collector off what start-up created.

    Every step allocates short-lived objects (frames, models, dicts); with the default
    thresholds the collector runs every few hundred steps and, every so often, walks the
    whole heap: the app, its schemas, every imported module. ``gc.freeze()`` moves what
    exists after start-up out of its sight, and a larger first-generation threshold makes
    collections rarer. Set ``OPENENV_GC_TUNING=0`` to keep Python's defaults.
    """
    config.load()
    if os.environ.get("OPENENV_GC_TUNING", "1").strip().lower() not in {"0", "false", "no", "off"}:
        gc.collect()
        gc.freeze()
        gc.set_threshold(50_000, 50, 100)
    return config


def _listen(settings: ServeSettings, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((settings.host, settings.port))
    sock.listen(settings.backlog)
    sock.set_inheritable(True)
    return sock


def _use_app_dir(settings: ServeSettings) -> None:
    if settings.app_dir and settings.app_dir not in sys.path:
        sys.path.insert(0, settings.app_dir)


class DrainingServer(uvicorn.Server):
    """uvicorn, with the shutdown an environment server needs.

    SIGTERM drains first (no new sessions, running episodes go on up to ``DRAIN_TIMEOUT``),
    then closes every session; SIGINT (Ctrl-C) skips the wait; a second signal ends the drain
    at once. Every environment is ``close()``d exactly once, and the process exits 0 instead
    of re-raising the signal.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._drain: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        loop = self._loop
        if loop is None or not self.started or self._drain is not None:
            # not serving yet, or the second signal: stop now (sessions are still closed once)
            self.should_exit = True
            if self._drain is not None:
                loop.call_soon_threadsafe(self._drain.cancel)  # type: ignore[union-attr]
            return
        timeout = None if sig == signal.SIGTERM else 0.0

        def start() -> None:
            self._drain = loop.create_task(self._drain_then_exit(timeout))

        loop.call_soon_threadsafe(start)

    async def _drain_then_exit(self, timeout: float | None) -> None:
        try:
            await drain.drain_all(timeout)
        finally:
            self.should_exit = True


def serve_forever(config: uvicorn.Config, sockets: list[socket.socket] | None = None) -> None:
    """Run one server process until it is told to stop; exit 0 within a bound."""
    DrainingServer(config).run(sockets=sockets)
    stuck = [t for t in threading.enumerate() if t.name.startswith("openenv-env") and t.is_alive()]
    if stuck:
        # A step that never returns would keep the interpreter from exiting (thread pools are
        # joined at exit). Its instance was closed already: leave without waiting for it.
        print(
            f"openenv: leaving {len(stuck)} environment thread(s) still running a step",
            file=sys.stderr,
        )
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _worker(settings: ServeSettings) -> None:
    """One worker process: its own SO_REUSEPORT listener, so the kernel spreads connections evenly."""
    raise_open_file_limit()
    _use_app_dir(settings)
    sock = _listen(settings, reuse_port=True)
    serve_forever(_loaded(_uvicorn_config(settings)), sockets=[sock])


def _supervise(settings: ServeSettings) -> None:
    """Run ``settings.workers`` workers, restart any that dies, stop them all on SIGINT/SIGTERM."""
    # Fail fast (and not silently share the port with a stale server) when the port is taken.
    _listen(settings, reuse_port=False).close()
    context = multiprocessing.get_context("spawn")
    worker_settings = replace(settings, workers=1)
    stopping = False

    def start() -> multiprocessing.process.BaseProcess:
        process = context.Process(target=_worker, args=(worker_settings,), name="openenv-worker")
        process.start()
        return process

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    workers = [start() for _ in range(settings.workers)]
    restarts = 0
    try:
        while not stopping:
            time.sleep(0.2)
            for i, process in enumerate(workers):
                if not process.is_alive() and not stopping:
                    restarts += 1
                    if restarts > 10 * settings.workers:
                        print("openenv: workers keep dying; stopping.", file=sys.stderr)
                        stopping = True
                        break
                    print(
                        f"openenv: worker {process.pid} exited ({process.exitcode}); restarting it.",
                        file=sys.stderr,
                    )
                    workers[i] = start()
    finally:
        for process in workers:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)  # each worker closes its sessions gracefully
        # each worker drains (DRAIN_TIMEOUT) then closes its sessions; allow for both
        grace = _env_seconds("DRAIN_TIMEOUT", DEFAULT_DRAIN_TIMEOUT) + 20
        deadline = time.monotonic() + grace
        for process in workers:
            process.join(max(deadline - time.monotonic(), 0.1))
            if process.is_alive():
                process.kill()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_server(settings: ServeSettings) -> None:
    """Serve until interrupted. Blocks; Ctrl-C / SIGTERM shut down gracefully (sessions closed)."""
    raise_open_file_limit()
    if settings.workers > 1 and not settings.reload:
        _supervise(settings)
        return
    config = _uvicorn_config(settings)
    if settings.reload:
        # The reloader re-imports the app in a child process, so it needs uvicorn.run.
        uvicorn.run(
            config.app,
            app_dir=settings.app_dir,
            **{
                k: getattr(config, k)
                for k in (
                    "host",
                    "port",
                    "reload",
                    "reload_dirs",
                    "log_level",
                    "ws_ping_interval",
                    "ws_ping_timeout",
                    "ws_per_message_deflate",
                    "ws_max_size",
                    "backlog",
                )
            },
        )
        return
    _use_app_dir(settings)
    serve_forever(_loaded(config))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m openenv_runtime.serve",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("app", help="import path of the ASGI app, e.g. my_env.server.app:app")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    parser.add_argument("--workers", type=int)
    parser.add_argument("--app-dir")
    args = parser.parse_args(argv)
    run_server(
        settings_from_env(
            args.app, host=args.host, port=args.port, workers=args.workers, app_dir=args.app_dir
        )
    )


if __name__ == "__main__":
    main()
