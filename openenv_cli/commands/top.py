"""``openenv top``: a live table of every replica of a fleet, or one JSON sample of it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from openenv_cli.errors import UsageError

DEFAULT_INTERVAL = 2.0


def command(
    urls: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="URL...",
            help="Base URLs of the replicas, e.g. http://10.0.0.5:8000 (http:// when left out).",
            show_default=False,
        ),
    ] = None,
    deploy: Annotated[
        Path | None,
        typer.Option(
            "--deploy",
            metavar="DIR",
            help="Watch the replicas `openenv deploy` recorded in DIR/endpoints.json (its --out "
            "folder), as well as any URL given.",
            file_okay=False,
            show_default=False,
        ),
    ] = None,
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            "-n",
            min=0.1,
            help="Seconds between two reads; steps/s and step p50/p99 cover this window.",
        ),
    ] = DEFAULT_INTERVAL,
    once: Annotated[
        bool,
        typer.Option(
            "--once", help="Read twice, --interval apart, print the second reading and exit."
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print a JSON list, one object per replica (an unreadable one: url and "
            "error); implies --once.",
        ),
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            help="API key for servers whose /metrics needs it \\[default: $OPENENV_API_KEY; "
            "prefer it: a flag shows in ps and shell history].",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Watch every replica of a fleet: sessions, steps/s, step latency, refusals, stuck calls.

    Per replica: sessions / capacity, steps/s, step p50/p99, refusals, resumes, stuck calls, version. Each replica's /health and /metrics are read every [bold]--interval[/] seconds, all replicas at once. Sessions, capacity, workers and totals are the whole server's (every worker's); steps/s and the step latency p50/p99 come from the differences between two reads (the step histogram's buckets, interpolated within a bucket), so the first screen shows them empty and [bold]--once[/] reads twice, one interval apart. A replica that cannot be read shows why, in its row. Ctrl-C quits. The key ([bold]$OPENENV_API_KEY[/]) travels in the Authorization header only and is never shown.
    """
    from openenv_cli.bench.auth import resolve_api_key
    from openenv_cli.fleet.scrape import Fleet, deploy_replicas, replica_url, sample

    targets = [replica_url(url) for url in urls or []]
    if deploy is not None:
        targets += [replica_url(url) for url in deploy_replicas(deploy)]
    if not targets:
        raise UsageError(
            "Name the replicas to watch.",
            hint="openenv top http://127.0.0.1:8000 ..., or openenv top --deploy deploy/slurm.",
        )
    fleet = Fleet(targets, resolve_api_key(token).value)
    if as_json or once:
        views = sample(fleet, interval)
        if as_json:
            typer.echo(json.dumps(views, indent=1))
        else:
            from openenv_cli.console import console

            console.print(fleet_table(views, interval))
        return
    _watch(fleet, interval)


def _watch(fleet: Any, interval: float) -> None:
    from rich.live import Live

    from openenv_cli.console import console

    try:
        with Live(console=console, auto_refresh=False, transient=False) as live:
            while True:
                started = time.monotonic()
                live.update(fleet_table(fleet.poll(), interval), refresh=True)
                time.sleep(max(0.0, interval - (time.monotonic() - started)))
    except KeyboardInterrupt:
        return  # Ctrl-C is how one leaves: not an error


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:.3g}"


def _where(url: str) -> str:
    return url.removeprefix("http://")


def _count(value: Any) -> str:
    return "—" if value is None else f"{value:,}"


def fleet_table(views: list[dict[str, Any]], interval: float) -> Any:
    """The rich table of ``views`` (as :meth:`Fleet.poll` returns them): a row per replica, a
    total row, and why each unreadable replica could not be read, below."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from openenv_cli.console import visible

    table = Table(
        title=f"openenv top · every {interval:g} s · Ctrl-C quits",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("replica", no_wrap=True, overflow="fold")
    table.add_column("status", no_wrap=True, min_width=6)
    for name in ("sessions", "steps/s", "p50 ms", "p99 ms", "refused", "resumed", "stuck"):
        table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
    table.add_column("version", no_wrap=True)
    sessions = capacity = up = 0
    rate: float | None = None
    errors = []
    for view in views:
        url = Text(visible(_where(view["url"])))
        if "error" in view:
            table.add_row(url, Text("down", style="red"))
            errors.append(Text(f"{visible(view['url'])}: {visible(view['error'])}", style="red"))
            continue
        up += 1
        sessions, capacity = sessions + view["sessions"], capacity + view["capacity"]
        if view["steps_per_second"] is not None:
            rate = (rate or 0.0) + view["steps_per_second"]
        status = view["status"]
        table.add_row(
            url,
            Text(visible(status), style="green" if status == "healthy" else "yellow"),
            f"{view['sessions']:,}/{view['capacity']:,}",
            "—" if view["steps_per_second"] is None else f"{view['steps_per_second']:,.1f}",
            _ms(view["step_p50_seconds"]),
            _ms(view["step_p99_seconds"]),
            Text(_count(view["refused"]), style="red" if view["refused"] else ""),
            _count(view["resumed"]),
            Text(_count(view["stuck"]), style="red" if view["stuck"] else ""),
            Text(visible(view["version"] or "—")),
        )
    if len(views) > 1:
        table.add_section()
        table.add_row(
            f"{up} of {len(views)} up",
            "",
            f"{sessions:,}/{capacity:,}",
            "—" if rate is None else f"{rate:,.1f}",
        )
    return Group(table, *errors)
