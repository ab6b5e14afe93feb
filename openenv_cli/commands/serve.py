"""``openenv serve``: run an environment locally on uvicorn."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from openenv_cli.console import console, err_console
from openenv_cli.serving import (
    ServePlan,
    app_environment,
    check_app_imports,
    check_port_free,
    open_file_advice,
    plan_serve,
    pythonpath_with,
)
from openenv_cli.validation.isolation import import_layout


def command(
    path: Annotated[
        Path, typer.Argument(help="The project folder (with openenv.yaml).", file_okay=False)
    ] = Path("."),
    host: Annotated[
        str | None, typer.Option(help="Interface to bind \\[env HOST; default 127.0.0.1].")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port \\[env PORT; openenv.yaml port; default 8000].")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Worker processes \\[env WORKERS; server.workers; default 1]."),
    ] = None,
    reload: Annotated[
        bool, typer.Option("--reload", help="Restart when the project's files change.")
    ] = False,
    max_concurrent_envs: Annotated[
        int | None,
        typer.Option(
            help="Sessions per worker \\[env MAX_CONCURRENT_ENVS; server.max_concurrent_envs; default 100]."
        ),
    ] = None,
    session_timeout: Annotated[
        float | None,
        typer.Option(
            help="Idle seconds before a session is closed \\[env SESSION_TIMEOUT; default 600; 0 = never]."
        ),
    ] = None,
    web: Annotated[
        bool | None,
        typer.Option(
            "--web/--no-web",
            help="Serve the web interface at /web \\[env ENABLE_WEB_INTERFACE; default on].",
        ),
    ] = None,
) -> None:
    """Serve the environment in PATH on uvicorn until Ctrl-C.

    Each setting comes from its flag, else its environment variable, else openenv.yaml, else
    the default. Capacity is per worker: --workers 8 --max-concurrent-envs 100 holds 800 sessions.
    """
    from openenv_runtime.serve import raise_open_file_limit, run_server, settings_from_env

    plan = plan_serve(
        path,
        host=host,
        port=port,
        workers=workers,
        reload=reload,
        max_concurrent_envs=max_concurrent_envs,
        session_timeout=session_timeout,
        web_interface=web,
    )
    check_port_free(plan.host.value, plan.port.value)
    with import_layout(plan.project_dir, plan.manifest.name, plan.manifest.app) as layout:
        check_app_imports(plan, str(layout.root))
        os.environ.update(app_environment(plan))
        os.environ["PYTHONPATH"] = pythonpath_with(str(layout.root))  # for worker processes
        soft, _ = raise_open_file_limit()
        advice = open_file_advice(soft, plan)
        if advice:
            err_console.print(f"[yellow]Warning:[/] {escape(advice)}", highlight=False)
        print_summary(plan)
        run_server(
            settings_from_env(
                plan.manifest.app,
                host=plan.host.value,
                port=plan.port.value,
                workers=plan.workers.value,
                reload=plan.reload,
                reload_dirs=(str(plan.project_dir),) if plan.reload else None,
                app_dir=str(layout.root),
            )
        )


def print_summary(plan: ServePlan) -> None:
    url = plan.base_url
    workers = plan.workers.value
    console.print(
        f"[bold green]Serving[/] {escape(plan.manifest.name)} ({escape(plan.manifest.app)})",
        highlight=False,
    )
    console.print(
        f"  capacity   {plan.total_capacity} sessions ({plan.max_concurrent_envs.value} per worker × {workers} "
        f"worker{'s' if workers > 1 else ''})",
        highlight=False,
    )
    console.print(f"  WebSocket  {url.replace('http', 'ws', 1)}/ws", highlight=False)
    if plan.web_interface.value:
        console.print(f"  web UI     {url}/web", highlight=False)
    console.print(f"  API docs   {url}/docs", highlight=False)
    console.print(f"  health     {url}/health", highlight=False)
    if plan.host.value in ("0.0.0.0", "::"):
        console.print("  [yellow]listening on every interface[/]")
    client = _client_class(plan)
    console.print("\n  Connect from Python:", style="bold")
    console.print(f"    from {plan.manifest.name} import {client}", highlight=False)
    console.print(
        f'    with {client}(base_url="{url}").sync() as env: print(env.reset())\n',
        highlight=False,
        soft_wrap=True,
    )


def _client_class(plan: ServePlan) -> str:
    from openenv_cli.scaffold import class_names

    try:
        return class_names(plan.manifest.name).client
    except Exception:
        return "EnvClient"
