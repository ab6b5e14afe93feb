"""``openenv fork``: copy a Hugging Face Space into your namespace."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from openenv_cli.commands.options import SpaceHardware, SpaceSecrets, SpaceVariables
from openenv_cli.console import console, visible

if TYPE_CHECKING:
    from openenv_cli.hub.fork import ForkResult


def command(
    space: Annotated[
        str,
        typer.Argument(
            metavar="SPACE",
            help="The Space to copy: OWNER/NAME, or its URL.",
            show_default=False,
        ),
    ],
    repo_id: Annotated[
        str | None,
        typer.Option(
            "--repo-id",
            "-r",
            help="The new Space, NAMESPACE/NAME; a bare NAME goes to your namespace \\[default: <your user>/<the source's name>].",
            show_default=False,
        ),
    ] = None,
    private: Annotated[
        bool | None,
        typer.Option(
            "--private/--public",
            help="Make the new Space private or public \\[default: as the source is].",
            show_default=False,
        ),
    ] = None,
    hardware: SpaceHardware = None,
    env: SpaceVariables = None,
    secret: SpaceSecrets = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            help="Hugging Face token with write access \\[default: $HF_TOKEN, then the `hf auth login` token].",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Copy a Hugging Face Space (an environment) into your namespace.

    It is the Hub's own duplicate: the Hub copies the Space's files, their history and its SDK, and its variables (-e overrides them). Secrets are never copied (nobody can read their values back): give the ones the copy needs with --secret, set in the same request; when your token can read the source's secret names, the ones still missing are listed. A Space that exists already is never overwritten. The Hub is [bold]$HF_ENDPOINT[/] (default https://huggingface.co).
    """
    from openenv_cli.config import parse_assignments
    from openenv_cli.hub.errors import Redactor, redacting, resolve_token
    from openenv_cli.hub.fork import fork_space

    secrets = parse_assignments(secret or [], "--secret", secret=True)
    redactor = Redactor(secrets.values())
    redactor.add(token)
    with redacting(redactor):
        variables = parse_assignments(env or [], "-e")
        found, source = resolve_token(token)
        redactor.add(found)
        with console.status(f"Forking {escape(space)} ..."):
            result = fork_space(
                space,
                found,
                repo_id=repo_id,
                private=private,
                hardware=hardware,
                variables=variables,
                secrets=secrets,
                token_source=source,
            )
    show_result(result)


def show_result(result: ForkResult) -> None:
    """The new Space, what it got, what it still lacks, and where to find it."""

    def say(text: str) -> None:
        console.print(text, highlight=False, soft_wrap=True)

    def names(items: list[str]) -> str:
        return ", ".join(escape(visible(n)) for n in items)

    say(
        f"[green]Forked[/] {escape(result.source)} to [bold]{escape(result.repo_id)}[/] "
        f"({'private' if result.private else 'public'}, {escape(result.sdk or 'unknown')} SDK, "
        f"{escape(result.hardware)})."
    )
    for note in result.notes:
        say(f"  [yellow]Note:[/] {escape(note)}")
    copied = [n for n in result.variables if n not in result.variables_set]
    if copied:
        say(f"  variables copied from the source: {names(copied)}")
    if result.variables_set:
        say(f"  variables set: {names(result.variables_set)}")
    if result.secrets_set:
        say(f"  secrets set: {names(result.secrets_set)}")
    settings = escape(f"{result.urls.page}/settings")
    if result.secrets_missing:
        say(
            f"  [yellow]secrets not copied:[/] {names(result.secrets_missing)}; set them at {settings}"
        )
    elif result.secrets_missing is None:
        say(f"  [dim]secrets are never copied; if the Space needs some, set them at {settings}[/]")
    say("")
    say(f"Space page:  {escape(result.urls.page)}")
    say(f"App:         {escape(result.urls.app)}")
    say("\nThe Space is building; follow it on the Space page.")
