"""``openenv validate``: check a project (or a running server) the way CI would."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit, urlunsplit

import typer

from openenv_cli.config import Setting, parse_str
from openenv_cli.errors import UsageError

TOKEN = Setting("token", env="OPENENV_API_KEY", parse=parse_str)


def command(
    path: Annotated[
        Path,
        typer.Argument(
            help="The project folder, or a family target (gymnasium:CartPole-v1) to serve and check."
        ),
    ] = Path("."),
    url: Annotated[
        str | None,
        typer.Option(
            "--url", help="Check this running server instead of the project (http(s)://host:port)."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of the table.")
    ] = False,
    no_smoke: Annotated[
        bool,
        typer.Option(
            "--no-smoke", help="Skip starting the server (static checks and the contract only)."
        ),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=0.1,
            help="Seconds allowed for each phase: importing, starting, each message.",
        ),
    ] = 60.0,
    update_lock: Annotated[
        bool,
        typer.Option(
            "--update-lock",
            help="Write openenv.lock.json from the current schemas (accepting any drift).",
        ),
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            help="Bearer token for --url (default: $OPENENV_API_KEY).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Check an environment project, a family target, or with [bold]--url[/] a running server, the way CI would.

    Project checks: openenv.yaml against its schema, the files the other commands need,
    pyproject.toml, the models and app import, an example action validates, the
    Dockerfile serves the app, the schema contract in [bold]openenv.lock.json[/] (breaking
    changes fail, additive ones warn), and a smoke test: the app on a free port, a real
    WebSocket episode, /health and /schema.

    A family target ([bold]gymnasium:CartPole-v1[/], [bold]reasoning_gym:leg_counting[/]) is
    served in local processes and checked as a running server: /health, /schema, /metadata
    and an episode.

    Exit code 0 when nothing fails (warnings allowed), 1 when a check fails, 2 for a usage error.
    """
    from openenv_cli.console import console
    from openenv_cli.validation import validate_family, validate_project, validate_url
    from openenv_cli.validation.render import render_json, render_table

    if url is not None:
        parts = urlsplit(url)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise UsageError(
                f"--url {url!r} is not a server URL.", hint="Use e.g. --url http://127.0.0.1:8000"
            )
        route = _server_route(parts.path)
        if route is not None:
            base = urlunsplit((parts.scheme, parts.netloc, parts.path[: -len(route)], "", ""))
            raise UsageError(
                f"--url {url!r} points at the server's {route.strip('/')} route, not at the server.",
                hint=f"Pass the base URL: `openenv validate --url {base.rstrip('/')}`.",
            )
        if update_lock:
            raise UsageError(
                "--update-lock needs the project, not --url.",
                hint="Run `openenv validate --update-lock` in the project.",
            )
        project_dir = path if (path / "openenv.yaml").is_file() else None
        with _progress(as_json, f"Checking {url} ..."):
            report = validate_url(
                url, project_dir=project_dir, timeout=timeout, token=TOKEN.resolve(flag=token).value
            )
    elif not path.exists() and _is_family_target(str(path)):
        if update_lock or no_smoke:
            raise UsageError(
                "--update-lock and --no-smoke apply to a project folder, not a family target.",
                hint="`openenv import TARGET --out DIR` writes a project of it; validate that.",
            )
        with _progress(as_json, f"Serving and checking {path} ..."):
            report = validate_family(str(path), timeout=timeout)
    else:
        if not path.exists():
            raise UsageError(
                f"{path} does not exist.",
                hint="Pass the project folder: `openenv validate path/to/my_env`.",
            )
        if not path.is_dir():
            raise UsageError(
                f"{path} is not a folder.", hint="Pass the project folder, not a file."
            )
        with _progress(as_json, "Validating (imports, then a smoke test) ..."):
            report = validate_project(
                path, smoke=not no_smoke, timeout=timeout, update_lock=update_lock
            )
    if as_json:
        render_json(report)
    else:
        render_table(report, console)
    if not report.ok:
        raise typer.Exit(1)


def _is_family_target(text: str) -> bool:
    from openenv_cli.targets import parse_target

    return parse_target(text).kind == "family"


# Routes every OpenEnv server has: a URL ending in one of them is a page, not the server.
_ROUTES = (
    "web",
    "docs",
    "redoc",
    "health",
    "schema",
    "metadata",
    "ws",
    "reset",
    "step",
    "state",
    "openapi.json",
)


def _server_route(path: str) -> str | None:
    """The known route ``path`` ends with (``/web/`` → ``/web/``), if any."""
    trimmed = path.rstrip("/")
    for route in _ROUTES:
        if trimmed == f"/{route}" or trimmed.endswith(f"/{route}"):
            return path[len(trimmed) - len(route) - 1 :]
    return None


def _progress(quiet: bool, message: str):  # type: ignore[no-untyped-def]
    from contextlib import nullcontext

    from openenv_cli.console import err_console

    return nullcontext() if quiet or not err_console.is_terminal else err_console.status(message)
