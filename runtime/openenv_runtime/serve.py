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
import os
import resource
from dataclasses import dataclass

import uvicorn


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


def run_server(settings: ServeSettings) -> None:
    """Serve until interrupted. Blocks; Ctrl-C / SIGTERM shut down gracefully."""
    raise_open_file_limit()
    uvicorn.run(
        settings.app,
        host=settings.host,
        port=settings.port,
        workers=settings.workers if settings.workers > 1 else None,
        reload=settings.reload,
        app_dir=settings.app_dir,
        log_level=settings.log_level,
        ws_ping_interval=settings.ws_ping_interval,
        ws_ping_timeout=settings.ws_ping_timeout,
        # Compression costs CPU and a third of each idle session's memory for small JSON frames.
        ws_per_message_deflate=False,
        # The app enforces its own, smaller limit with a clear error; this is the hard ceiling.
        ws_max_size=64 << 20,
        backlog=settings.backlog,
        timeout_graceful_shutdown=10,
        proxy_headers=True,
        forwarded_allow_ips="*",
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m openenv_runtime.serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("app", help="import path of the ASGI app, e.g. my_env.server.app:app")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    parser.add_argument("--workers", type=int)
    parser.add_argument("--app-dir")
    args = parser.parse_args(argv)
    run_server(settings_from_env(args.app, host=args.host, port=args.port, workers=args.workers, app_dir=args.app_dir))


if __name__ == "__main__":
    main()
