"""Show a :class:`Report`: a rich table for people, one JSON document for machines."""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from openenv_cli.validation.results import Report, Status

_STYLE = {
    Status.PASS: ("[green]✔ pass[/]", ""),
    Status.WARN: ("[yellow]! warn[/]", "yellow"),
    Status.FAIL: ("[bold red]✘ fail[/]", "red"),
    Status.SKIP: ("[dim]- skip[/]", "dim"),
}


def render_table(report: Report, console: Console) -> None:
    table = Table(
        title=f"openenv validate {escape(report.target)}",
        title_justify="left",
        show_lines=False,
        expand=False,
    )
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True, style="bold")
    table.add_column("result", overflow="fold")
    for check in report.checks:
        label, style = _STYLE[check.status]
        text = escape(check.message)
        if style:
            text = f"[{style}]{text}[/]"
        if check.fix and check.status in (Status.FAIL, Status.WARN):
            text += f"\n[dim]→ {escape(check.fix)}[/]"
        table.add_row(label, escape(check.name), text)
    console.print(table)
    counts = report.counts()
    warnings = "1 warning" if counts["warn"] == 1 else f"{counts['warn']} warnings"
    summary = (
        f"{counts['pass']} passed, {warnings}, {counts['fail']} failed, {counts['skip']} skipped"
    )
    if report.ok:
        console.print(f"[bold green]OK[/]: {summary}.")
    else:
        console.print(f"[bold red]FAILED[/]: {summary}.")


def render_json(report: Report) -> None:
    sys.stdout.write(json.dumps(report.to_json(), indent=2, default=str) + "\n")
    sys.stdout.flush()
