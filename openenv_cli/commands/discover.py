"""``openenv discover``: list environment Spaces on the Hugging Face Hub."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from openenv_cli.console import console, visible

if TYPE_CHECKING:
    from openenv_cli.hub.discover import EnvSpace


def command(
    query: Annotated[
        str | None,
        typer.Argument(
            metavar="QUERY",
            help="Only Spaces whose id contains this (case-insensitive), e.g. echo or alice/.",
            show_default=False,
        ),
    ] = None,
    author: Annotated[
        str | None,
        typer.Option(
            "--author",
            "-a",
            help="Only the Spaces of this user or organization.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int,
        typer.Option("--limit", "-n", min=1, max=1000, help="At most this many Spaces."),
    ] = 20,
    sort: Annotated[
        str,
        typer.Option(
            "--sort",
            help="Order, most first: likes, updated or created.",
        ),
    ] = "likes",
    no_versions: Annotated[
        bool,
        typer.Option(
            "--no-versions",
            help="Do not read each Space's openenv.yaml for its version (one listing request only).",
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print one JSON object: the query and a list of Spaces, for scripts."
        ),
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            help="Hugging Face token, to list private Spaces too \\[default: $HF_TOKEN, then the `hf auth login` token, else none: public Spaces only].",
            show_default=False,
        ),
    ] = None,
) -> None:
    """List environment Spaces on the Hugging Face Hub with their version and hardware.

    An environment Space is one tagged [bold]openenv[/] (what `openenv push` writes in its README). The version is the `version:` of the Space's openenv.yaml. The Hub is [bold]$HF_ENDPOINT[/] (default https://huggingface.co).
    """
    from openenv_cli.errors import UsageError
    from openenv_cli.hub.discover import SORTS, discover_spaces
    from openenv_cli.hub.errors import Redactor, find_token, redacting

    if sort not in SORTS:
        raise UsageError(
            f"--sort {sort!r} is not an order discover knows.",
            hint="Use one of: " + ", ".join(SORTS) + ".",
        )
    found = find_token(token)
    redactor = Redactor([found[0]] if found else [])
    with redacting(redactor):
        spaces = discover_spaces(
            query,
            author=author,
            limit=limit,
            sort=sort,
            token=found[0] if found else None,
            token_source=found[1] if found else "no token",
            versions=not no_versions,
        )
    if as_json:
        payload = {
            "query": query,
            "author": author,
            "tag": "openenv",
            "spaces": [asdict(space) for space in spaces],
        }
        typer.echo(json.dumps(payload, indent=2))
        return
    show_spaces(spaces, query=query, author=author)


def show_spaces(spaces: list[EnvSpace], *, query: str | None, author: str | None) -> None:
    """A table of the Spaces found, or a line saying there are none and what to try."""
    from rich.table import Table

    if not spaces:
        within = " ".join(
            part
            for part in (
                f"matching {query!r}" if query else "",
                f"by {author}" if author else "",
            )
            if part
        )
        console.print(
            f"No environment Spaces {escape(within)} found (Spaces tagged openenv).".replace(
                "  ", " "
            ),
            highlight=False,
            soft_wrap=True,
        )
        return
    table = Table("SPACE", "VERSION", "HARDWARE", "STATUS", "LIKES", "UPDATED", box=None)
    for space in spaces:
        name = escape(visible(space.id)) + (" [dim](private)[/]" if space.private else "")
        table.add_row(
            name,
            escape(visible(space.version or "-")),
            escape(visible(space.hardware or "-")),
            escape(visible(space.stage or "-")),
            str(space.likes),
            (space.last_modified or "-")[:10],
        )
    console.print(table)
    console.print(
        "[dim]Copy one into your namespace: openenv fork SPACE --repo-id YOU/NAME[/]",
        highlight=False,
    )
