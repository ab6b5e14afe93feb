"""``openenv capture``: run the token-capturing proxy in front of a model server."""

from __future__ import annotations

import ipaddress
import logging
import os
from dataclasses import dataclass
from typing import Annotated

import typer

from openenv_cli.console import console
from openenv_cli.errors import OpenEnvError, UsageError


@dataclass(frozen=True)
class CaptureSettings:
    """What the proxy runs with, each value resolved once (flag, then environment variable)."""

    upstream: str
    host: str
    port: int
    upstream_api_key: str | None
    admin_token: str | None
    max_body_bytes: int | None = None  # None: the proxy's own limit
    max_sessions: int | None = None  # None: the proxy's own limit
    gc_tuning: bool = True  # OPENENV_GC_TUNING=0: Python's own collector settings


def resolve(
    upstream: str | None,
    host: str,
    port: int,
    upstream_api_key: str | None,
    admin_token: str | None,
    max_body_bytes: int | None = None,
    max_sessions: int | None = None,
) -> CaptureSettings:
    """The settings, checked: an upstream URL, and an admin token off the loopback interface."""
    upstream = upstream or os.environ.get("OPENENV_CAPTURE_UPSTREAM")
    if not upstream or "://" not in upstream:
        raise UsageError(
            "openenv capture needs the model server's URL.",
            hint="Pass --upstream http://127.0.0.1:8000/v1 (or set OPENENV_CAPTURE_UPSTREAM).",
        )
    token = admin_token or os.environ.get("OPENENV_CAPTURE_TOKEN") or None
    if token is None and not _loopback(host):
        raise OpenEnvError(
            f"refusing to serve the capture proxy on {host} without an admin token: anyone "
            "who reaches it could open sessions and read every recorded conversation.",
            hint="Set OPENENV_CAPTURE_TOKEN (or --admin-token), or bind --host 127.0.0.1.",
        )
    key = upstream_api_key or os.environ.get("OPENENV_UPSTREAM_API_KEY") or None
    if max_body_bytes is None:
        max_body_bytes = _positive_int(
            "OPENENV_CAPTURE_MAX_BODY_BYTES", "bytes", "67108864 (64 MiB)"
        )
    if max_sessions is None:
        max_sessions = _positive_int("OPENENV_CAPTURE_MAX_SESSIONS", "sessions", "4096")
    return CaptureSettings(
        upstream, host, port, key, token, max_body_bytes, max_sessions, _gc_tuning()
    )


def _gc_tuning() -> bool:
    """``OPENENV_GC_TUNING``, read as ``openenv serve`` reads it (pydantic's booleans)."""
    raw = os.environ.get("OPENENV_GC_TUNING")
    if raw is None or raw.strip() == "":
        return True
    from pydantic import TypeAdapter, ValidationError  # only when set: the CLI starts faster

    try:
        return TypeAdapter(bool).validate_python(raw.strip())
    except ValidationError:
        raise UsageError(
            f"OPENENV_GC_TUNING={raw!r} is not a yes or a no.",
            hint="Set OPENENV_GC_TUNING=0 to keep Python's collector settings, or unset it.",
        ) from None


def _positive_int(name: str, unit: str, example: str) -> int | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise UsageError(
            f"{name}={raw!r} is not a positive number of {unit}.",
            hint=f"Set {name} to a whole number such as {example}, or unset it.",
        )
    return value


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def command(
    upstream: Annotated[
        str | None,
        typer.Option(help="The model server's base URL \\[env OPENENV_CAPTURE_UPSTREAM]."),
    ] = None,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8300,
    upstream_api_key: Annotated[
        str | None,
        typer.Option(help="Key sent to the model server \\[env OPENENV_UPSTREAM_API_KEY]."),
    ] = None,
    admin_token: Annotated[
        str | None,
        typer.Option(
            help="Token the /sessions routes require \\[env OPENENV_CAPTURE_TOKEN; needed "
            "off the loopback interface]."
        ),
    ] = None,
    max_body_bytes: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Largest request body forwarded, in bytes; a larger one gets 413 "
            "\\[env OPENENV_CAPTURE_MAX_BODY_BYTES; default: the proxy's limit, printed at start].",
        ),
    ] = None,
    max_sessions: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Most sessions held at once; past it POST /sessions gets 429 until one is "
            "deleted \\[env OPENENV_CAPTURE_MAX_SESSIONS; default: the proxy's limit, printed at "
            "start].",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No log line per forwarded call.")] = False,
) -> None:
    """Proxy a model server and record each session's token ids and log-probabilities.

    POST /sessions gives a session (session_id, base_url, api_key) for an agent harness;
    GET /sessions/ID/trace_entries reads what it sampled and DELETE /sessions/ID ends it,
    each with the session's api_key (or the admin token); GET /sessions lists the sessions.
    Only /v1/chat/completions, /v1/completions and /v1/models are forwarded; each call is
    logged (session, route, status, latency) unless --quiet.
    """
    settings = resolve(
        upstream, host, port, upstream_api_key, admin_token, max_body_bytes, max_sessions
    )
    try:
        import uvicorn

        from openenv_runtime.capture import CaptureProxy
        from openenv_runtime.capture.server import protocol_for
        from openenv_runtime.serve import tune_gc
    except ModuleNotFoundError as missing:
        raise OpenEnvError(
            f"openenv capture needs {missing.name}.",
            hint='pip install "openenv-runtime[llm]"',
        ) from None
    proxy = CaptureProxy(
        settings.upstream,
        upstream_api_key=settings.upstream_api_key,
        admin_token=settings.admin_token,
    )
    if settings.max_body_bytes is not None:
        proxy.max_body_bytes = settings.max_body_bytes
    if settings.max_sessions is not None:
        proxy.max_sessions = settings.max_sessions
    console.print(
        f"capture proxy on http://{settings.host}:{settings.port} → {settings.upstream} "
        f"(POST /sessions for a base_url and api_key; request bodies up to "
        f"{proxy.max_body_bytes:,} bytes, at most {proxy.max_sessions:,} sessions)",
        highlight=False,
    )
    if not quiet:
        calls = logging.StreamHandler()
        calls.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        capture_log = logging.getLogger("openenv_runtime.capture")
        capture_log.addHandler(calls)
        capture_log.setLevel(logging.INFO)
    if settings.gc_tuning:  # the collector: 4-6% of the proxy's samples (py-spy) before
        tune_gc()
    # access_log off: uvicorn would build each request's log line for a logger set to warn
    uvicorn.run(
        proxy.app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        access_log=False,
        http=protocol_for(proxy),  # the forwarded calls answered below ASGI
    )
