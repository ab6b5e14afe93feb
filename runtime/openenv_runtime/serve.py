"""Run an environment app on uvicorn, tuned for many long-lived WebSocket sessions.

``python -m openenv_runtime.serve my_env.server.app:app`` is what container images run.
Every setting comes from its flag, else its environment variable, else ``openenv.yaml``, else
the app's ``create_app`` argument, else the default (:mod:`openenv_runtime.server.config.settings`;
``--help`` lists them). The flags are handed to every worker before the app is imported, so
each setting acts the same with one worker or many.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures.thread
import gc
import multiprocessing
import os
import resource
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.importer import ImportFromStringError, import_from_string

from openenv_runtime.server import connections, metrics
from openenv_runtime.server.config.fields import (
    FLAGS_VARIABLE,
    KEYS,
    MANIFEST_VARIABLE,
    ServerSettings,
)
from openenv_runtime.server.config.settings import app_settings, flags_variable, load_settings
from openenv_runtime.server.sessions import drain

from .adapters.served import served_app
from .adapters.target import parse_family_target
from .errors import AdapterError, EnvironmentContractError
from .redaction import install_redaction


@dataclass(frozen=True, slots=True)
class Launch:
    """What one launch serves, besides the settings: the app, and how it is loaded."""

    app: str
    reload: bool = False
    app_dir: str | None = None
    reload_dirs: tuple[str, ...] = ()
    backlog: int = 4096


def hand_over(flags: Mapping[str, Any], manifest: str | Path | None = None) -> ServerSettings:
    """Give this launch's ``flags`` (and ``openenv.yaml``) to every process it starts; resolve them.

    Call it before the app is imported: ``create_app`` resolves its settings from the same
    environment, in this process and in each worker.
    """
    given = {k: v for k, v in flags.items() if v is not None}
    if given:
        os.environ[FLAGS_VARIABLE] = flags_variable(given)
    else:
        os.environ.pop(FLAGS_VARIABLE, None)
    if manifest is not None:
        os.environ[MANIFEST_VARIABLE] = str(Path(manifest).resolve())
    return load_settings().values


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


def uvicorn_options(settings: ServerSettings, *, reload: bool = False) -> dict[str, Any]:
    """uvicorn's options for ``settings``: the protocol-level limits every server gets.

    Each call binds a new :class:`~openenv_runtime.server.connections.ConnectionGuard` (one per
    server); under ``reload`` (options pickled to a child process) the protocols use that
    process's own guard, made from the same settings.
    """
    http: type
    ws: type
    if reload:
        http, ws = connections.GuardedHTTPProtocol, connections.GuardedWebSocketProtocol
    else:
        http, ws = connections.protocols(connections.for_settings(settings))
    return {
        "log_level": settings.log_level,
        "ws_ping_interval": settings.ws_ping_interval,
        "ws_ping_timeout": settings.ws_ping_timeout,
        # Compression costs CPU and a third of each idle session's memory for small JSON frames.
        "ws_per_message_deflate": False,
        # A larger message is refused by the protocol layer (close 1009) before it is buffered.
        "ws_max_size": settings.max_message_bytes,
        # Headers of one request may not grow past this (h11; httptools has its own 80 KiB cap).
        "h11_max_incomplete_event_size": 64 << 10,
        # uvicorn's own limit would refuse /health too: the guarded protocol applies it instead,
        # with a per-address cap and a deadline for a new connection's headers.
        "http": http,
        "ws": ws,
        "limit_concurrency": None,
        "timeout_keep_alive": settings.timeout_keep_alive,
        "proxy_headers": True,
        "forwarded_allow_ips": settings.forwarded_allow_ips,
    }


def _loaded(launch: Launch, settings: ServerSettings) -> uvicorn.Config:
    """uvicorn's config of ``launch``, its app imported and loaded, the garbage collector
    kept off what start-up created (:func:`tune_gc`; ``OPENENV_GC_TUNING=0`` keeps Python's
    defaults).

    An app made by ``create_app`` resolved its own settings, its ``create_app`` arguments
    included (say a larger ``max_concurrent_envs``): those set the protocol-level limits, so
    they agree with its session registry. The address is the launch's (``settings``), and
    ``settings`` serve in full for any other app.
    """
    app = _imported(launch.app)
    own = app_settings(app)
    limits = own.values if own is not None else settings
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        reload=launch.reload,
        reload_dirs=list(launch.reload_dirs) or None,
        backlog=launch.backlog,
        timeout_graceful_shutdown=5,  # after a drain, only steps that never return are left
        **uvicorn_options(limits),
    )
    config.load()
    install_redaction()  # after uvicorn configured its loggers
    if limits.gc_tuning:
        tune_gc()
    return config


def _imported(target: str) -> Any:
    """The ASGI app at ``module:attribute`` (exit 1 with uvicorn's message when there is none)."""
    try:
        return import_from_string(target)
    except ImportFromStringError as exc:
        print(f"Error loading ASGI app. {exc}", file=sys.stderr)
        sys.exit(1)


def tune_gc() -> None:
    """Keep the garbage collector off what a server's start-up created (call it once, when
    the app is loaded and before serving).

    Every request allocates short-lived objects (frames, models, dicts); with the default
    thresholds the collector runs every few hundred requests and, every so often, walks the
    whole heap: the app, its schemas, every imported module. ``gc.freeze()`` moves what
    exists after start-up out of its sight, and a larger first-generation threshold makes
    collections rarer.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)


def _listen(settings: ServerSettings, reuse_port: bool, backlog: int = 4096) -> socket.socket:
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((settings.host, settings.port))
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


def _use_app_dir(launch: Launch) -> None:
    if launch.app_dir and launch.app_dir not in sys.path:
        sys.path.insert(0, launch.app_dir)


_POOL_FILE = concurrent.futures.thread.__file__


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
        if os.environ.get(drain.SUPERVISOR_VARIABLE):
            # a sibling worker took POST /admin/drain: the supervisor tells every worker
            self._loop.add_signal_handler(drain.DRAIN_SIGNAL, self._drain_on_request)
        await super().serve(sockets)

    def _drain_on_request(self) -> None:
        assert self._loop is not None
        drain.start_local_drain(self._loop)

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


def busy_environment_threads() -> list[threading.Thread]:
    """The environment threads running a call now (an idle pool thread waiting for work is not)."""
    frames = sys._current_frames()
    busy = []
    for thread in threading.enumerate():
        if not thread.name.startswith(("openenv-env", "openenv-session")) or not thread.is_alive():
            continue
        frame = frames.get(thread.ident) if thread.ident is not None else None
        while frame is not None:
            # A pool thread runs each call inside concurrent.futures' work item's run().
            if frame.f_code.co_name == "run" and frame.f_code.co_filename == _POOL_FILE:
                busy.append(thread)
                break
            frame = frame.f_back
    return busy


def serve_forever(config: uvicorn.Config, sockets: list[socket.socket] | None = None) -> None:
    """Run one server process until it is told to stop; exit 0 within a bound."""
    DrainingServer(config).run(sockets=sockets)
    stuck = busy_environment_threads()
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


def _worker(launch: Launch) -> None:
    """One worker process: its own SO_REUSEPORT listener, so the kernel spreads connections evenly."""
    raise_open_file_limit()
    _use_app_dir(launch)
    settings = load_settings().values  # the launcher's flags arrive in the environment
    sock = _listen(settings, reuse_port=True, backlog=launch.backlog)
    serve_forever(_loaded(launch, settings), sockets=[sock])


def _supervise(launch: Launch, settings: ServerSettings) -> None:
    """Run ``settings.workers`` workers, restart any that dies, stop them all on SIGINT/SIGTERM."""
    # Fail fast (and not silently share the port with a stale server) when the port is taken.
    _listen(settings, reuse_port=False).close()
    context = multiprocessing.get_context("spawn")
    stopping = False

    def start() -> multiprocessing.process.BaseProcess:
        process = context.Process(target=_worker, args=(launch,), name="openenv-worker")
        process.start()
        return process

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    def drain_every_worker(signum: int, _frame: object) -> None:
        for process in workers:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, drain.DRAIN_SIGNAL)

    # One folder for every worker's metric files, so /metrics on any of them shows the totals:
    # the operator's (PROMETHEUS_MULTIPROC_DIR, kept), else a private one removed at exit.
    shared = os.environ.get(metrics.MULTIPROC_VARIABLE) or None
    made = None
    if settings.metrics and shared is None:
        made = shared = tempfile.mkdtemp(prefix="openenv-metrics-")  # 0700
        os.environ[metrics.MULTIPROC_VARIABLE] = made  # inherited by each worker
    workers: list[multiprocessing.process.BaseProcess] = []
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    previous[drain.DRAIN_SIGNAL] = signal.signal(drain.DRAIN_SIGNAL, drain_every_worker)
    os.environ[drain.SUPERVISOR_VARIABLE] = str(os.getpid())  # inherited by each worker
    workers.extend(start() for _ in range(settings.workers))
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
                    if shared is not None and process.pid is not None:
                        metrics.forget_worker(shared, process.pid)
                    workers[i] = start()
    finally:
        for process in workers:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)  # each worker closes its sessions gracefully
        # each worker drains (DRAIN_TIMEOUT) then closes its sessions; allow for both
        grace = settings.drain_timeout + 20
        deadline = time.monotonic() + grace
        for process in workers:
            process.join(max(deadline - time.monotonic(), 0.1))
            if process.is_alive():
                process.kill()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if made is not None:
            os.environ.pop(metrics.MULTIPROC_VARIABLE, None)
            shutil.rmtree(made, ignore_errors=True)


def run_server(launch: Launch, settings: ServerSettings | None = None) -> None:
    """Serve until interrupted. Blocks; Ctrl-C / SIGTERM shut down gracefully (sessions closed).

    ``settings`` default to :func:`load_settings`; call :func:`hand_over` first so that the
    workers see the same flags.
    """
    settings = settings or load_settings().values
    raise_open_file_limit()
    if settings.workers > 1 and not launch.reload:
        _supervise(launch, settings)
        return
    if launch.reload:
        # The reloader re-imports the app in a child process, so it needs uvicorn.run (and
        # only its own Config: each one with reload on logs "Will watch ..." again).
        install_redaction()
        uvicorn.run(
            launch.app,
            app_dir=launch.app_dir,
            host=settings.host,
            port=settings.port,
            reload=True,
            reload_dirs=list(launch.reload_dirs) or None,
            backlog=launch.backlog,
            **uvicorn_options(settings, reload=True),
        )
        return
    _use_app_dir(launch)
    serve_forever(_loaded(launch, settings))


def build_parser() -> argparse.ArgumentParser:
    """The command line: the app, then one flag per server setting."""
    parser = argparse.ArgumentParser(
        prog="python -m openenv_runtime.serve",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "app",
        help="import path of the ASGI app, e.g. my_env.server.app:app, or a family target "
        "FAMILY:NAME[?key=value&...], e.g. gymnasium:CartPole-v1",
    )
    parser.add_argument("--app-dir", help="folder put first on sys.path")
    parser.add_argument("--manifest", help="openenv.yaml to read (default: ./openenv.yaml)")
    for name, key in KEYS.items():
        if key.flag is None:
            continue
        where = f"env {key.env}" + (f"; openenv.yaml {key.yaml}" if key.yaml else "")
        help_text = f"{key.description} [{where}]"
        if "/" in key.flag:  # --web/--no-web
            parser.add_argument(
                key.flag.split("/")[0],
                dest=name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_text,
            )
        else:
            parser.add_argument(key.flag, dest=name, default=None, help=help_text)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    app, app_dir, manifest = args.pop("app"), args.pop("app_dir"), args.pop("manifest")
    try:
        target = parse_family_target(app)
        if target is not None:
            app = served_app(target)
        settings = hand_over(args, manifest)
    except (EnvironmentContractError, AdapterError) as exc:
        parser.error(str(exc))  # one line and exit status 2, no traceback
    print(settings_summary(app), file=sys.stderr, flush=True)
    run_server(Launch(app, app_dir=app_dir), settings)


def settings_summary(app: str) -> str:
    """What a container's log starts with: the app and each stated setting with its source."""
    rows = load_settings().summary()
    width = max(len(name) for name, _, _ in rows)
    lines = [f"openenv_runtime.serve {app}: settings (create_app's arguments fill the defaults)"]
    lines += [f"  {name:<{width}}  {value}  ({origin})" for name, value, origin in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
