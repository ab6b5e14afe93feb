"""``openenv bench``: measure how many concurrent sessions, and how many steps per second, a server holds."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from openenv_cli.console import console
from openenv_cli.errors import OpenEnvError, UsageError

if TYPE_CHECKING:
    from openenv_cli.bench.stats import BenchRun


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
        self.overall: TaskID | None = None
        self.current: TaskID | None = None

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


BENCH_EXTRA_HINT = (
    "Install it with: pip install 'openenv-toolkit[bench]' "
    "(from a checkout: pip install -e '.[bench]')."
)


def _require_bench_extra() -> None:
    """``openenv bench`` needs the ``bench`` extra (psutil); say so instead of a traceback."""
    try:
        import psutil  # noqa: F401
    except ImportError:
        raise OpenEnvError(
            "`openenv bench` needs the optional `bench` extra (psutil, to read server CPU and memory).",
            hint=BENCH_EXTRA_HINT,
        ) from None


def _waits(wait_grid: str | None, mode: str, wait_field: bool) -> list[float]:
    if wait_field:
        return _float_list(wait_grid or ("1.0,5.0" if mode == "sessions" else "0"), "--wait-grid")
    waits = _float_list(wait_grid or "0", "--wait-grid")
    if any(waits):
        raise UsageError(
            "--wait-grid applies only to an environment whose action has a `wait` field "
            "(the built-in one: --serve); this action has none.",
            hint="Leave out --wait-grid: each step then takes as long as the environment takes.",
        )
    return [0.0]


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
            help="Write PNG plots (matplotlib, part of the bench extra: pip install 'openenv-toolkit[bench]').",
        ),
    ] = True,
) -> None:
    """Measure a server: concurrent sessions (the scaling-study workload) or steps per second.

    Sessions mode: for every batch size and wait, that many sessions at once, each connecting, resetting, stepping once (the step waits WAIT seconds) and closing; reports success, connect/reset/step/total p50 and p99, requests per second and the max batch with ≥95% success.

    Throughput mode: C sessions doing K back-to-back steps; reports steps/s and step latency.

    Every step sends the measured environment's own action: --action or --action-file; with --serve the built-in {"wait": ...}; else the example_action of ./openenv.yaml; else an example built from the server's /schema. When the server answers most steps of a run with an error, the benchmark stops and shows the first one.

    Traffic goes only where --url points (or to the server --serve starts on 127.0.0.1).
    """
    _require_bench_extra()
    from openenv_cli.bench import report
    from openenv_cli.bench.action import resolve_action
    from openenv_cli.bench.runner import MODES, BenchSettings, run_bench
    from openenv_cli.bench.server import ServerStartError, bench_server
    from openenv_cli.bench.sessions import Target

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
    try:
        base_url = Target.parse(url).http_url if url else ""
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    step_action = resolve_action(
        action=action,
        action_file=action_file,
        serve=serve,
        base_url=base_url,
        project_dir=Path.cwd(),
        timeout=min(timeout, 10.0),
    )
    settings = BenchSettings(
        url=url or "http://127.0.0.1:1",
        mode=mode,
        transport=transport,
        requests_grid=_int_list(requests_grid, "--requests-grid"),
        wait_grid=_waits(wait_grid, mode, step_action.wait_field),
        reps=reps,
        sessions=_int_list(sessions, "--sessions"),
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
        shown = json.dumps(step_action.value)
        console.print(
            f"step action: {escape(shown if len(shown) <= 200 else shown[:200] + '…')}"
            + (" + wait" if step_action.wait_field else "")
            + f" ({escape(step_action.source)})",
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

    stem = f"bench-{mode}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    if run.failure is not None:
        _write_reports(report, run, output_dir, stem, plots=False)
        raise OpenEnvError(
            "The server answered most steps with an error, so there is nothing to measure. "
            f"First error: {run.failure}",
            hint=f"The action came from {step_action.source}. Pass the action the environment "
            "expects with --action JSON or --action-file PATH.",
        )
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
            else ", server unknown (pass --server-pid to read it)"
        ),
        highlight=False,
    )
    overflow = report.listen_overflow_note(run)
    if overflow:
        console.print(f"[yellow]{escape(overflow)}[/]", highlight=False)
    for note in run.notes:
        if "deadline" in note:
            console.print(f"[yellow]{escape(note)}[/]", highlight=False)
    paths = _write_reports(report, run, output_dir, stem, plots=plots)
    if plots and not paths["plots"]:
        console.print(f"[dim]No plots: matplotlib is not installed. {escape(BENCH_EXTRA_HINT)}[/]")
    if run.cells and all(c.ok == 0 for c in run.cells):
        first = run.cells[0]
        raise OpenEnvError(
            f"Every session failed (e.g. {', '.join(first.errors) or 'unknown'}).",
            hint=f"Check that {settings.url} serves an OpenEnv environment, or try --serve.",
        )


def _write_reports(
    report: ModuleType, run: BenchRun, output_dir: Path, stem: str, *, plots: bool
) -> dict[str, Any]:
    try:
        paths: dict[str, Any] = report.write_reports(run, output_dir, stem, plots=plots)
    except OSError as exc:
        raise OpenEnvError(
            f"Could not write the reports to {output_dir}: {exc}",
            hint="Choose a writable folder with --output-dir.",
        ) from None
    written = [paths["json"], paths["csv"], paths["markdown"], *paths["plots"]]
    console.print(
        "Reports: " + ", ".join(escape(os.path.relpath(str(p))) for p in written), highlight=False
    )
    return paths
