"""``openenv bench``: measure how many concurrent sessions, and how many steps per second, a server holds."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from openenv_cli.bench.options import (
    BENCH_EXTRA_HINT,
    check_choices,
    int_list,
    require_bench_extra,
    waits,
)
from openenv_cli.commands.bench_output import (
    run_with_progress,
    show_start,
    show_summary,
    write_reports,
)
from openenv_cli.console import console
from openenv_cli.errors import OpenEnvError, UsageError


def command(
    url: Annotated[
        str | None,
        typer.Option(
            help="Base URL of the server to measure, e.g. http://127.0.0.1:8000, or a family "
            "target (gymnasium:CartPole-v1) to serve on a free 127.0.0.1 port and measure."
        ),
    ] = None,
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Start the built-in benchmark environment on a free 127.0.0.1 port and measure it.",
        ),
    ] = False,
    workers: Annotated[
        int, typer.Option(help="With --serve or a family target: server worker processes.")
    ] = 1,
    action: Annotated[
        str | None,
        typer.Option(
            metavar="JSON",
            help="The action every step sends, as a JSON object \\[default: the project's "
            "example_action in openenv.yaml, else an example built from the server's /schema].",
        ),
    ] = None,
    action_file: Annotated[
        Path | None,
        typer.Option(metavar="PATH", help="Read the action (a JSON object) from this file."),
    ] = None,
    sync: Annotated[
        bool,
        typer.Option(
            "--sync",
            help="With --serve: the sync variant (step runs time.sleep on the thread pool).",
        ),
    ] = False,
    mode: Annotated[
        str,
        typer.Option(
            help="sessions (connect, reset, one step, close) or throughput (C sessions × K steps); ws or http mean the sessions workload over that transport."
        ),
    ] = "sessions",
    requests_grid: Annotated[
        str, typer.Option(help="Sessions mode: concurrent sessions per run, comma-separated.")
    ] = "32,128,512,2048",
    wait_grid: Annotated[
        str | None,
        typer.Option(
            help="Seconds each step waits (only for an action with a `wait` field, like the built-in one), comma-separated \\[sessions: 1.0,5.0; throughput: 0]."
        ),
    ] = None,
    reps: Annotated[int, typer.Option(help="Repetitions of every run.")] = 3,
    sessions: Annotated[
        str,
        typer.Option(
            help="Throughput mode: concurrent sessions C (comma-separated for several runs)."
        ),
    ] = "64",
    steps: Annotated[
        int, typer.Option(help="Throughput mode: back-to-back steps K per session.")
    ] = 1000,
    transport: Annotated[
        str, typer.Option(help="ws (the /ws endpoint) or http (POST /reset, /step, /close).")
    ] = "ws",
    timeout: Annotated[
        float, typer.Option(help="Seconds each operation may take (a step: this plus its wait).")
    ] = 30.0,
    deadline: Annotated[
        float, typer.Option(help="Seconds the whole benchmark may take; later runs are skipped.")
    ] = 1800.0,
    processes: Annotated[
        int, typer.Option(help="Load-generator processes (each with its own event loop).")
    ] = 1,
    server_pid: Annotated[
        list[int] | None,
        typer.Option(
            "--server-pid",
            help="Server process id(s), to report its CPU time (children included).",
        ),
    ] = None,
    compression: Annotated[
        bool,
        typer.Option(
            "--compression/--no-compression", help="Offer permessage-deflate, as common clients do."
        ),
    ] = True,
    client: Annotated[
        str,
        typer.Option(
            help="WebSocket client: lean (websockets' sans-I/O protocol, cheapest) or websockets (its asyncio client)."
        ),
    ] = "lean",
    output_dir: Annotated[
        Path, typer.Option(help="Where to write JSON, CSV, Markdown and PNG reports.")
    ] = Path("bench-results"),
    plots: Annotated[
        bool,
        typer.Option(
            "--plots/--no-plots",
            help="Write PNG plots (matplotlib, part of the bench extra: pip install 'openenv-toolkit\\[bench]').",
        ),
    ] = True,
    study: Annotated[
        str | None,
        typer.Option(
            "--study",
            metavar="INFRAS",
            help="Run the scaling study on the project in the current folder: deploy it on each of local,docker,swarm,slurm (comma-separated), run the sessions grid, take it down, and write one report (Markdown, JSON, PNG). Missing infrastructure is skipped with the reason.",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            help="Access token for a server started with OPENENV_API_KEY \\[default: "
            "$OPENENV_API_KEY; prefer it: a flag shows in ps and shell history].",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Measure a server: concurrent sessions (the scaling-study workload) or steps per second.

    Sessions mode: for every batch size and wait, that many sessions at once, each connecting, resetting, stepping once (the step waits WAIT seconds) and closing; reports success, connect/reset/step/total p50 and p99, requests per second and the max batch with ≥95% success.

    Throughput mode: C sessions doing K back-to-back steps; reports steps/s and step latency.

    Every step sends the measured environment's own action: --action or --action-file; with --serve the built-in {"wait": ...}; else the example_action of ./openenv.yaml; else an example built from the server's /schema. When the server answers most steps of a run with an error, the benchmark stops and shows the first one.

    Traffic goes only where --url points (or to the server --serve starts on 127.0.0.1). A server started with OPENENV_API_KEY needs its key: export OPENENV_API_KEY=... before running; it is sent as `Authorization: Bearer` and never shown or written to the reports.
    """
    require_bench_extra()
    if study is not None:
        from openenv_cli.commands.bench_study import run_study_command

        run_study_command(study, requests_grid, wait_grid, reps, timeout, deadline, processes, output_dir,
                          plots=plots, action=action, action_file=action_file, token=token)  # fmt: skip
        return
    from openenv_cli.bench import report
    from openenv_cli.bench.action import resolve_action
    from openenv_cli.bench.auth import TOKEN_ENV, Unauthorized, resolve_api_key
    from openenv_cli.bench.runner import (
        BenchSettings,
        adopt_health,
        read_health,
    )
    from openenv_cli.bench.server import ServerStartError, bench_server
    from openenv_cli.bench.target import Target
    from openenv_cli.targets import parse_target, start_target

    family = parse_target(url) if url is not None and not serve else None
    if family is not None and family.kind != "family":
        family = None  # a URL: measured as it is (Target.parse checks it)
    mode, transport = check_choices(
        url=url,
        serve=serve,
        mode=mode,
        transport=transport,
        client=client,
        workers=workers,
        sync=sync,
        starts_server=family is not None,
    )
    resolved = resolve_api_key(token)
    token_source = resolved.origin if resolved.value else None
    started = None
    if family is not None:
        # the server gets the token in its environment (never argv), as with --serve
        started, urls = start_target(
            family, workers=workers, env={TOKEN_ENV: resolved.value} if resolved.value else None
        )
        url = urls[0]
    try:  # a family target's server (started above) is stopped whatever happens
        try:
            base_url = Target.parse(url).http_url if url else ""
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        step_action = resolve_action(
            action=action,
            action_file=action_file,
            serve=serve,
            base_url=base_url,
            project_dir=Path.cwd() if family is None else None,
            timeout=min(timeout, 10.0),
            token=resolved.value,
            token_source=token_source,
        )
        settings = BenchSettings(
            url=url or "http://127.0.0.1:1",
            mode=mode,
            transport=transport,
            requests_grid=int_list(requests_grid, "--requests-grid"),
            wait_grid=waits(wait_grid, mode, step_action.wait_field),
            reps=reps,
            sessions=int_list(sessions, "--sessions"),
            steps=steps,
            timeout=timeout,
            deadline=deadline,
            processes=processes,
            compression=compression,
            client=client,
            server_pids=list(server_pid or []),
            action=step_action.value,
            wait_field=step_action.wait_field,
            action_source=step_action.source,
            token=resolved.value,
        )
        try:
            settings.check()
        except ValueError as exc:
            raise UsageError(str(exc)) from None

        server = None
        description = None
        if started is not None:
            settings.server_pids = [*settings.server_pids, *getattr(started, "pids", [])]
            description = f"{family}, python -m openenv_runtime.serve, {workers} worker(s), {url}"
        if serve:
            # the server gets the token in its environment (never argv), so both sides agree
            server_env = {TOKEN_ENV: resolved.value} if resolved.value else None
            server = bench_server(workers=workers, sync=sync, env=server_env)
            settings.url = server.url
            description = (
                f"built-in benchmark environment ({'sync' if sync else 'async'}), "
                f"python -m openenv_runtime.serve, {workers} worker(s), 127.0.0.1:{server.port}"
            )
        try:
            if server is not None:
                server.start()
                try:
                    server.wait_healthy(60)
                except ServerStartError as exc:
                    raise OpenEnvError(
                        f"The benchmark server did not start: {exc}",
                        hint="Run `python -m openenv_runtime.serve openenv_cli.bench.bench_env:app` "
                        "to see why.",
                    ) from None
                settings.server_pids = server.pids
            show_start(adopt_health(settings, read_health(settings)), settings, step_action)
            run = run_with_progress(settings, description)
        finally:
            if server is not None:
                server.stop()
    finally:
        if started is not None:
            started.stop()

    if run.unauthorized is not None:
        raise Unauthorized(settings.url, run.unauthorized, token_source)
    stem = f"bench-{mode}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    if run.failure is not None:
        write_reports(report, run, output_dir, stem, plots=False)
        raise OpenEnvError(
            "The server answered most steps with an error, so there is nothing to measure. "
            f"First error: {run.failure}",
            hint=f"The action came from {step_action.source}. Pass the action the environment "
            "expects with --action JSON or --action-file PATH.",
        )
    show_summary(report, run, settings)
    paths = write_reports(report, run, output_dir, stem, plots=plots)
    if plots and not paths["plots"]:
        console.print(f"[dim]No plots: matplotlib is not installed. {escape(BENCH_EXTRA_HINT)}[/]")
    if run.cells and all(c.ok == 0 for c in run.cells):
        first = run.cells[0]
        raise OpenEnvError(
            f"Every session failed (e.g. {', '.join(first.errors) or 'unknown'}).",
            hint=f"Check that {settings.url} serves an OpenEnv environment, or try --serve.",
        )
