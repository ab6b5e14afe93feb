"""``openenv serve``: run an environment locally on uvicorn."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from openenv_cli.console import console, err_console

if TYPE_CHECKING:  # the runtime (fastapi) and the manifest load only when serving
    from openenv_cli.serving import ServePlan


def command(
    path: Annotated[
        Path,
        typer.Argument(
            help="The project folder (with openenv.yaml), MODULE:APP / FILE.py:APP for a single-file environment, or FAMILY:NAME (e.g. gymnasium:CartPole-v1) for another library's environment."
        ),
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
            help="Idle seconds before a session is closed \\[env SESSION_TIMEOUT; "
            "server.session_timeout; default 600; 0 = never]."
        ),
    ] = None,
    step_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds an environment's constructor, reset, step, state or tool call may run "
            "before its session ends with STEP_TIMEOUT \\[env STEP_TIMEOUT; server.step_timeout; "
            "default off]."
        ),
    ] = None,
    max_sessions_per_client: Annotated[
        int | None,
        typer.Option(
            help="Sessions one client (token, else address) may hold \\[env "
            "MAX_SESSIONS_PER_CLIENT; server.max_sessions_per_client; default off locally, 16 "
            "when public (auth on, or on a Space); 0 = off]."
        ),
    ] = None,
    unused_session_timeout: Annotated[
        float | None,
        typer.Option(
            help="Idle seconds before an HTTP session opened but never stepped is closed "
            "\\[env UNUSED_SESSION_TIMEOUT; server.unused_session_timeout; default 60]."
        ),
    ] = None,
    header_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds a new connection gets to send its request headers \\[env "
            "HEADER_TIMEOUT; server.header_timeout; default 10]."
        ),
    ] = None,
    max_connections_per_address: Annotated[
        int | None,
        typer.Option(
            help="Open connections one client address may hold per worker \\[env "
            "MAX_CONNECTIONS_PER_ADDRESS; default sessions + 32; 0 = no cap]."
        ),
    ] = None,
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            help="Proxies trusted for X-Forwarded-For \\[env FORWARDED_ALLOW_IPS; "
            "server.forwarded_allow_ips; default 127.0.0.1,::1]."
        ),
    ] = None,
    limit_concurrency: Annotated[
        int | None,
        typer.Option(
            help="Open connections per worker \\[env LIMIT_CONCURRENCY; "
            "server.limit_concurrency; default 2 × sessions + 64]."
        ),
    ] = None,
    resume_grace: Annotated[
        float | None,
        typer.Option(
            help="Seconds a dropped session waits to be resumed \\[env SESSION_RESUME_GRACE; "
            "server.resume_grace; default 30]."
        ),
    ] = None,
    drain_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds running sessions get on shutdown \\[env DRAIN_TIMEOUT; "
            "server.drain_timeout; default 30]."
        ),
    ] = None,
    warm_pool: Annotated[
        int | None,
        typer.Option(
            help="Instances created ahead of demand \\[env WARM_POOL; server.warm_pool; default 0]."
        ),
    ] = None,
    capacity_refusal: Annotated[
        str | None,
        typer.Option(
            help="How a full server refuses a WebSocket session: http (503 before the upgrade, "
            "a balancer retries elsewhere), message (CAPACITY_REACHED), auto (http behind a "
            "balancer that sends X-OpenEnv-Balancer) \\[env OPENENV_CAPACITY_REFUSAL; "
            "server.capacity_refusal; default auto]."
        ),
    ] = None,
    checkpoint_dir: Annotated[
        str | None,
        typer.Option(
            help="Folder that keeps checkpoints, shared by replicas \\[env CHECKPOINT_DIR; "
            "server.checkpoint_dir; default: memory]."
        ),
    ] = None,
    max_checkpoint_bytes: Annotated[
        int | None,
        typer.Option(
            help="Largest state a checkpoint may hold \\[env MAX_CHECKPOINT_BYTES; "
            "server.max_checkpoint_bytes; default 16 MiB]."
        ),
    ] = None,
    checkpoint_ttl: Annotated[
        float | None,
        typer.Option(
            help="Seconds a checkpoint is kept \\[env CHECKPOINT_TTL; server.checkpoint_ttl; "
            "default 3600; 0 = until deleted]."
        ),
    ] = None,
    max_checkpoints: Annotated[
        int | None,
        typer.Option(
            help="Checkpoints kept in all; past it the oldest go first \\[env MAX_CHECKPOINTS; "
            "server.max_checkpoints; default 1024]."
        ),
    ] = None,
    max_checkpoint_total_bytes: Annotated[
        int | None,
        typer.Option(
            help="Bytes of checkpoints kept in all; past it the oldest go first \\[env "
            "MAX_CHECKPOINT_TOTAL_BYTES; server.max_checkpoint_total_bytes; default 16 × "
            "--max-checkpoint-bytes]."
        ),
    ] = None,
    max_checkpoints_per_client: Annotated[
        int | None,
        typer.Option(
            help="Checkpoints one client may keep \\[env MAX_CHECKPOINTS_PER_CLIENT; "
            "server.max_checkpoints_per_client; default off locally, a quarter of "
            "--max-checkpoints when public; 0 = off]."
        ),
    ] = None,
    max_checkpoint_bytes_per_client: Annotated[
        int | None,
        typer.Option(
            help="Bytes of checkpoints one client may keep \\[env "
            "MAX_CHECKPOINT_BYTES_PER_CLIENT; server.max_checkpoint_bytes_per_client; default "
            "off locally, a quarter of the total when public; 0 = off]."
        ),
    ] = None,
    code_wait_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds a code-mode run waits for a worker slot \\[env CODE_WAIT_TIMEOUT; "
            "server.code_wait_timeout; default 30]."
        ),
    ] = None,
    code_slots_per_client: Annotated[
        int | None,
        typer.Option(
            help="Code-mode worker slots one client may hold \\[env CODE_SLOTS_PER_CLIENT; "
            "server.code_slots_per_client; default off locally, half when public; 0 = off]."
        ),
    ] = None,
    web: Annotated[
        bool | None,
        typer.Option(
            "--web/--no-web",
            help="Serve the web interface at /web \\[env ENABLE_WEB_INTERFACE; "
            "server.web_interface; default on].",
        ),
    ] = None,
    metrics: Annotated[
        bool | None,
        typer.Option(
            "--metrics/--no-metrics",
            help="Serve /metrics (Prometheus text format) \\[env OPENENV_METRICS; "
            "server.metrics; default on].",
        ),
    ] = None,
    public_metrics: Annotated[
        bool | None,
        typer.Option(
            "--public-metrics/--no-public-metrics",
            help="Serve /metrics without the API key when auth is on \\[env "
            "OPENENV_PUBLIC_METRICS; server.public_metrics; default off].",
        ),
    ] = None,
) -> None:
    """Serve the environment in PATH on uvicorn until Ctrl-C.

    PATH is a project folder (with openenv.yaml), MODULE:APP (FILE.py:APP) for a
    single-file environment such as guess:app, or a family target FAMILY:NAME[?key=value&...]
    for another library's environment, e.g. gymnasium:CartPole-v1 (quote it in a shell), or
    harbor:/abs/path/to/task for a Harbor task folder run in Docker containers.

    Each setting comes from its flag, else its environment variable, else openenv.yaml, else
    the default; the summary says which. Capacity is per worker: --workers 8
    --max-concurrent-envs 100 holds 800 sessions.
    """
    from openenv_cli.serving import (
        adopt_app_settings,
        check_app_imports,
        check_port_free,
        open_file_advice,
        plan_serve,
        workers_advice,
    )
    from openenv_cli.validation.isolation import import_layout
    from openenv_runtime.serve import Launch, hand_over, raise_open_file_limit, run_server

    plan = plan_serve(
        path,
        reload=reload,
        flags={
            "host": host,
            "port": port,
            "workers": workers,
            "max_concurrent_envs": max_concurrent_envs,
            "session_timeout": session_timeout,
            "step_timeout": step_timeout,
            "max_sessions_per_client": max_sessions_per_client,
            "unused_session_timeout": unused_session_timeout,
            "header_timeout": header_timeout,
            "max_connections_per_address": max_connections_per_address,
            "forwarded_allow_ips": forwarded_allow_ips,
            "limit_concurrency": limit_concurrency,
            "resume_grace": resume_grace,
            "drain_timeout": drain_timeout,
            "warm_pool": warm_pool,
            "capacity_refusal": capacity_refusal,
            "checkpoint_dir": checkpoint_dir,
            "max_checkpoint_bytes": max_checkpoint_bytes,
            "checkpoint_ttl": checkpoint_ttl,
            "max_checkpoints": max_checkpoints,
            "max_checkpoint_total_bytes": max_checkpoint_total_bytes,
            "max_checkpoints_per_client": max_checkpoints_per_client,
            "max_checkpoint_bytes_per_client": max_checkpoint_bytes_per_client,
            "code_wait_timeout": code_wait_timeout,
            "code_slots_per_client": code_slots_per_client,
            "web_interface": web,
            "metrics": metrics,
            "public_metrics": public_metrics,
        },
    )
    settings = plan.settings
    check_port_free(settings.host, settings.port)
    with import_layout(plan.project_dir, plan.manifest.name, plan.manifest.app) as layout:
        # Before the app is imported (below, and in each worker): create_app reads them.
        hand_over(plan.flags, plan.manifest_path)
        os.environ["PYTHONPATH"] = layout.env["PYTHONPATH"]  # for worker processes
        app = check_app_imports(plan, layout.env["PYTHONPATH"].split(os.pathsep))
        plan = adopt_app_settings(plan, app)
        soft, _ = raise_open_file_limit()
        for advice in (
            open_file_advice(soft, plan),
            workers_advice(settings.workers, os.cpu_count()),
        ):
            if advice:
                err_console.print(f"[yellow]Warning:[/] {escape(advice)}", highlight=False)
        print_summary(plan)
        run_server(
            Launch(
                plan.manifest.app,
                reload=plan.reload,
                reload_dirs=(str(plan.project_dir),) if plan.reload else (),
                app_dir=str(layout.root),
            ),
            settings,
        )


def print_summary(plan: ServePlan) -> None:
    url = plan.base_url
    workers = plan.settings.workers
    console.print(
        f"[bold green]Serving[/] {escape(plan.manifest.name)} ({escape(plan.manifest.app)})",
        highlight=False,
    )
    console.print(
        f"  capacity   {plan.total_capacity} sessions ({plan.per_worker} per worker × {workers} "
        f"worker{'s' if workers > 1 else ''}; {escape(plan.capacity_source)})",
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"  WebSocket  {url.replace('http', 'ws', 1)}/ws", highlight=False)
    if plan.settings.web_interface:
        console.print(f"  web UI     {url}/web", highlight=False)
    console.print(f"  API docs   {url}/docs", highlight=False)
    console.print(f"  health     {url}/health", highlight=False)
    if plan.settings.host in ("0.0.0.0", "::"):
        console.print("  [yellow]listening on every interface[/]")
    # plain aligned lines, not a table: a narrow or piped console must not wrap the "from" column
    console.print(f"\n  [bold]{'setting':<25} {'value':<15} from[/]", highlight=False)
    for name, value, source in plan.rows():
        console.print(
            f"  {escape(name):<25} {escape(value):<15} {escape(source)}",
            highlight=False,
            soft_wrap=True,
        )
    for line in plan.resolved.overrides():
        console.print(f"  [yellow]note[/] {escape(line)}", highlight=False, soft_wrap=True)
    client = _client_class(plan)
    console.print("\n  Connect from Python:", style="bold")
    package = "openenv_runtime" if plan.single_file else plan.manifest.name
    console.print(f"    from {package} import {client}", highlight=False)
    console.print(
        f'    with {client}(base_url="{url}").sync() as env: print(env.reset())\n',
        highlight=False,
        soft_wrap=True,
    )


def _client_class(plan: ServePlan) -> str:
    from openenv_cli.scaffold import class_names

    if plan.single_file:
        return "GenericEnvClient"
    try:
        return class_names(plan.manifest.name).client
    except Exception:
        return "EnvClient"
