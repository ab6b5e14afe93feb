"""``openenv bench``: measure how many concurrent sessions, and how many steps per second, a server holds."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from openenv_cli.console import console
from openenv_cli.errors import OpenEnvError, UsageError


def _int_list(raw: str, flag: str) -> list[int]:
    try:
        values = [int(part) for part in raw.replace(" ", "").split(",") if part]
    except ValueError:
        raise UsageError(
            f"{flag} takes whole numbers separated by commas, got {raw!r}",
            hint=f"For example: {flag} 32,128,512",
        ) from None
    if not values or min(values) < 1:
        raise UsageError(f"{flag} needs positive numbers, got {raw!r}")
    return values


def _float_list(raw: str, flag: str) -> list[float]:
    try:
        values = [float(part) for part in raw.replace(" ", "").split(",") if part]
    except ValueError:
        raise UsageError(
            f"{flag} takes numbers of seconds separated by commas, got {raw!r}",
            hint=f"For example: {flag} 1.0,5.0",
        ) from None
    if not values or min(values) < 0:
        raise UsageError(f"{flag} needs waits of 0 seconds or more, got {raw!r}")
    return values


class _LiveObserver:
    """Shows a bar for the whole grid and one for the current run."""

    def __init__(self, bars: Progress) -> None:
        self.bars = bars
        self.overall: int | None = None
        self.current: int | None = None

    def cell_started(self, index: int, count: int, label: str, units: int) -> None:
        if self.overall is None:
            self.overall = self.bars.add_task("all runs", total=count)
        self.bars.update(self.overall, completed=index)
        if self.current is not None:
            self.bars.remove_task(self.current)
        self.current = self.bars.add_task(escape(label), total=units)

    def progress(self, done: int, total: int) -> None:
        if self.current is not None:
            self.bars.update(self.current, completed=done, total=total)

    def cell_finished(self, cell: object) -> None:
        if self.overall is not None:
            self.bars.advance(self.overall)
        success = getattr(cell, "success_rate", 1.0)
        if success < 1:
            errors = ", ".join(
                f"{k} ×{v}" for k, v in list(getattr(cell, "errors", {}).items())[:3]
            )
            self.bars.console.print(
                f"  [yellow]{success * 100:.1f}% success[/] {escape(errors)}", highlight=False
            )


def command(
    url: Annotated[
        str | None,
        typer.Option(help="Base URL of the server to measure, e.g. http://127.0.0.1:8000."),
    ] = None,
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Start the built-in benchmark environment on a free 127.0.0.1 port and measure it.",
        ),
    ] = False,
    workers: Annotated[int, typer.Option(help="With --serve: server worker processes.")] = 1,
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
            help="Seconds each step waits, comma-separated \\[sessions: 1.0,5.0; throughput: 0]."
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
            help="Server process id(s), to report its CPU from /proc (children included).",
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
            help="Write PNG plots (needs matplotlib: pip install 'openenv-toolkit[plot]').",
        ),
    ] = True,
) -> None:
    """Measure a server: concurrent sessions (the scaling-study workload) or steps per second.

    Sessions mode: for every batch size and wait, that many sessions at once, each connecting, resetting, stepping once (the step waits WAIT seconds) and closing; reports success, connect/reset/step/total p50 and p99, requests per second and the max batch with ≥95% success.

    Throughput mode: C sessions doing K back-to-back steps; reports steps/s and step latency.

    Traffic goes only where --url points (or to the server --serve starts on 127.0.0.1).
    """
    from openenv_cli.bench import report
    from openenv_cli.bench.runner import MODES, BenchSettings, run_bench
    from openenv_cli.bench.server import ServerStartError, bench_server

    if serve == (url is not None):
        raise UsageError(
            "Give either --url URL (a running server) or --serve (start the built-in benchmark environment)."
        )
    if mode in ("ws", "http"):  # the scaling study's own wording: --mode ws|http
        mode, transport = "sessions", mode
    if mode not in MODES:
        raise UsageError(f"--mode must be sessions, throughput, ws or http, got {mode!r}")
    if transport not in ("ws", "http"):
        raise UsageError(f"--transport must be ws or http, got {transport!r}")
    if client not in ("lean", "websockets"):
        raise UsageError(f"--client must be lean or websockets, got {client!r}")
    if (workers != 1 or sync) and not serve:
        raise UsageError("--workers and --sync only apply with --serve.")
    default_wait = "1.0,5.0" if mode == "sessions" else "0"
    settings = BenchSettings(
        url=url or "http://127.0.0.1:1",
        mode=mode,
        transport=transport,
        requests_grid=_int_list(requests_grid, "--requests-grid"),
        wait_grid=_float_list(wait_grid or default_wait, "--wait-grid"),
        reps=reps,
        sessions=_int_list(sessions, "--sessions"),
        steps=steps,
        timeout=timeout,
        deadline=deadline,
        processes=processes,
        compression=compression,
        client=client,
        server_pids=list(server_pid or []),
    )
    try:
        settings.check()
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    server = None
    description = None
    if serve:
        server = bench_server(workers=workers, sync=sync)
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
        console.print(
            f"[bold]openenv bench[/] {mode} → {escape(settings.url)} ({transport}), "
            f"{processes} load-generator process(es)",
            highlight=False,
        )
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=console, transient=True) as progress:
            run = run_bench(settings, _LiveObserver(progress), server=description)
    finally:
        if server is not None:
            server.stop()

    headers, rows = report.summary_table(run)
    table = Table(*headers, title=f"openenv bench: {mode}", title_justify="left")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    if mode == "sessions":
        for wait, batch in run.max_batch.items():
            console.print(
                f"max batch at ≥95% success, wait {wait:g} s: "
                + (f"[bold]{batch:,}[/]" if batch is not None else "[red]none[/]")
            )
    server_cpu = run.server_cpu_s
    console.print(
        f"CPU: load generator {run.loadgen_cpu_s:.2f} s"
        + (
            f", server {server_cpu:.2f} s"
            if server_cpu is not None
            else ", server unknown (pass --server-pid to read it from /proc)"
        ),
        highlight=False,
    )
    overflow = report.listen_overflow_note(run)
    if overflow:
        console.print(f"[yellow]{escape(overflow)}[/]", highlight=False)
    for note in run.notes:
        if "deadline" in note:
            console.print(f"[yellow]{escape(note)}[/]", highlight=False)
    stem = f"bench-{mode}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    try:
        paths = report.write_reports(run, output_dir, stem, plots=plots)
    except OSError as exc:
        raise OpenEnvError(
            f"Could not write the reports to {output_dir}: {exc}",
            hint="Choose a writable folder with --output-dir.",
        ) from None
    written = [paths["json"], paths["csv"], paths["markdown"], *paths["plots"]]  # type: ignore[misc]
    console.print(
        "Reports: " + ", ".join(escape(os.path.relpath(str(p))) for p in written), highlight=False
    )
    if plots and not paths["plots"]:
        console.print(
            "[dim]No plots: matplotlib is not installed (pip install 'openenv-toolkit[plot]').[/]"
        )
    if all(c.ok == 0 for c in [*run.sessions, *run.throughput]) and (
        run.sessions or run.throughput
    ):
        first = next(iter([*run.sessions, *run.throughput]))
        raise OpenEnvError(
            f"Every session failed (e.g. {', '.join(first.errors) or 'unknown'}).",
            hint=f"Check that {settings.url} serves an OpenEnv environment whose action accepts `wait`, "
            "or try --serve.",
        )
