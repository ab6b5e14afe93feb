"""``openenv init``: create a new environment project."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def command(
    name: Annotated[
        str,
        typer.Argument(
            help="Project and package name: lowercase letters, digits and underscores, e.g. my_env.",
            show_default=False,
        ),
    ],
    output_dir: Annotated[
        Path,
        typer.Option(
            "--output-dir", "-o", help="Folder to create the project in.", file_okay=False
        ),
    ] = Path("."),
    description: Annotated[
        str | None,
        typer.Option("--description", "-d", help="One line describing the environment."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            "-f",
            help="Write into an existing non-empty folder, replacing generated files.",
        ),
    ] = False,
) -> None:
    """Create a new environment project NAME: models, client, server, Dockerfile, tests.

    Class names come from NAME in PascalCase, with a trailing [bold]_env[/] dropped so they
    read naturally: [bold]my_env[/] gives MyEnv (the client), MyAction, MyObservation,
    MyState and MyEnvironment; [bold]echo[/] gives EchoEnv, EchoAction, ... EchoEnvironment.

    The project folder is itself the Python package NAME, so after
    [bold]pip install -e .[/] it imports as [bold]from my_env.models import MyAction[/].
    """
    from rich.markup import escape

    from openenv_cli.console import console
    from openenv_cli.scaffold import (
        class_names,
        render_project,
        validate_project_name,
        write_project,
    )

    validate_project_name(name)
    context = {}
    if description is not None:
        context["description"] = (
            " ".join(description.split()) or "An OpenEnv-compatible RL environment."
        )
    files = render_project(name, context)
    dest = output_dir / name
    write_project(files, dest, force=force)

    classes = class_names(name)
    shown = dest if not dest.is_absolute() else dest
    console.print(f"[green]Created[/] {escape(str(shown))}/ ({len(files)} files)", highlight=False)
    for relative in sorted(files):
        console.print(f"  {escape(relative)}", highlight=False, style="dim")
    console.print(
        f"\nClasses: client [bold]{classes.client}[/], [bold]{classes.action}[/], [bold]{classes.observation}[/], "
        f"[bold]{classes.state}[/], [bold]{classes.environment}[/]\n"
    )
    console.print("Next steps:", style="bold")
    console.print(f"  cd {escape(str(shown))}", highlight=False)
    console.print("  pip install -e .      [dim]# the package and openenv-runtime[/]")
    console.print("  pytest                [dim]# a real episode through a real server[/]")
    console.print("  openenv validate      [dim]# what CI checks[/]")
    console.print("  openenv serve         [dim]# http://127.0.0.1:8000[/]")
