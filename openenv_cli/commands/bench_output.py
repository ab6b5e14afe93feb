"""What ``openenv bench`` prints: the run's start, its progress, the summary, the reports."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from rich.console import Console
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
from openenv_cli.errors import OpenEnvError

if TYPE_CHECKING:
    from openenv_cli.bench.action import StepAction
    from openenv_cli.bench.runner import BenchSettings
    from openenv_cli.bench.stats import BenchRun


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


class _LineObserver:
    """Progress as plain lines, for a console that is not a terminal (CI logs, pipes)."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self.started = 0.0

    def cell_started(self, index: int, count: int, label: str, units: int) -> None:
        self.started = time.monotonic()
        self.out.print(f"run {index + 1}/{count}: {escape(label)}", highlight=False)

    def progress(self, done: int, total: int) -> None:
        pass

    def cell_finished(self, cell: object) -> None:
        success = getattr(cell, "success_rate", 1.0)
        self.out.print(
            f"  done in {time.monotonic() - self.started:.1f} s, {success * 100:.1f}% success",
            highlight=False,
        )


def show_start(health_notes: Iterable[str], settings: BenchSettings, action: StepAction) -> None:
    """The server's health notes, then what is measured and with which action."""
    for line in health_notes:
        style = "yellow" if "exceeds" in line or "unknown" in line else "dim"
        console.print(escape(line), style=style, highlight=False, soft_wrap=True)
    console.print(
        f"[bold]openenv bench[/] {settings.mode} → {escape(settings.url)} "
        f"({settings.transport}), {settings.processes} load-generator process(es)",
        highlight=False,
    )
    shown = json.dumps(action.value)
    console.print(
        f"step action: {escape(shown if len(shown) <= 200 else shown[:200] + '…')}"
        + (" + wait" if action.wait_field else "")
        + f" ({escape(action.source)})",
        highlight=False,
    )


def run_with_progress(settings: BenchSettings, description: str | None) -> BenchRun:
    """Run the benchmark, with bars on a terminal and plain lines elsewhere."""
    from openenv_cli.bench.runner import run_bench

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    if console.is_terminal:
        with Progress(*columns, console=console, transient=True) as progress:
            return run_bench(settings, _LiveObserver(progress), server=description)
    return run_bench(settings, _LineObserver(console), server=description)


def show_summary(report: ModuleType, run: BenchRun, settings: BenchSettings) -> None:
    """The summary table, the capacity notes, the max batch per wait, CPU and warnings."""
    from openenv_cli.bench.runner import capacity_notes

    mode = settings.mode
    headers, rows = report.summary_table(run)
    table = Table(*headers, title=f"openenv bench: {mode}", title_justify="left")
    for row in rows:
        table.add_row(*row)
    print_whole(table)
    for note in capacity_notes(settings):
        console.print(f"[yellow]{escape(note)}[/]", highlight=False, soft_wrap=True)
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


def print_whole(table: Table) -> None:
    """Print ``table``; piped or captured (where rich assumes 80 columns), at its full width."""
    if console.is_terminal:
        console.print(table)
        return
    from rich.measure import Measurement

    wide = console.options.update_width(10_000)
    needed = Measurement.get(console, wide, table).maximum
    Console(file=console.file, width=max(needed, console.width), no_color=console.no_color).print(
        table
    )


def write_reports(
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
