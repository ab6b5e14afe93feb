"""``openenv init``: create a new environment project."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from openenv_cli.licenses import DEFAULT_LICENSE


def command(
    name: Annotated[
        str,
        typer.Argument(
            help="Project and package name: lowercase letters, digits and single underscores, "
            "starting with a letter, e.g. my_env.",
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
    license_: Annotated[
        str,
        typer.Option(
            "--license",
            "-l",
            metavar="SPDX",
            help="The project's licence: an SPDX expression (MIT, Apache-2.0, ...) written to "
            "pyproject.toml, with a LICENSE file for BSD-3-Clause, BSD-2-Clause, MIT and ISC; "
            "`none` for neither.",
        ),
    ] = DEFAULT_LICENSE,
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
    import datetime

    from rich.markup import escape

    from openenv_cli.console import console
    from openenv_cli.licenses import canonical_license, license_text
    from openenv_cli.scaffold import (
        class_names,
        project_context,
        render_project,
        template_root,
        validate_project_name,
        write_project,
    )

    validate_project_name(name)
    spdx = canonical_license(license_)
    context: dict[str, object] = {"license": spdx}
    if description is not None:
        context["description"] = (
            " ".join(description.split()) or "An OpenEnv-compatible RL environment."
        )
    title = project_context(name)["title"]
    text = None
    if spdx is not None:
        text = license_text(
            spdx, template_root(), holder=f"the {title} authors", year=datetime.date.today().year
        )
    context["license_file"] = text is not None
    files = render_project(name, context)
    if text is not None:
        files["LICENSE"] = text
    dest = output_dir / name
    write_project(files, dest, force=force)

    classes = class_names(name)
    lines = [f"[green]Created[/] {escape(str(dest))}/ ({len(files)} files)"]
    lines += [f"[dim]  {escape(relative)}[/]" for relative in sorted(files)]
    lines.append(
        f"\nClasses: client [bold]{classes.client}[/], [bold]{classes.action}[/], [bold]{classes.observation}[/], "
        f"[bold]{classes.state}[/], [bold]{classes.environment}[/]"
    )
    if spdx is None:
        lines.append("Licence: none (add one to pyproject.toml and a LICENSE file).")
    elif text is None:
        lines.append(
            f"Licence: {escape(spdx)} in pyproject.toml; add its text as LICENSE "
            '(and `license-files = ["LICENSE"]` to pyproject.toml).'
        )
    else:
        lines.append(f"Licence: {escape(spdx)} (LICENSE and pyproject.toml).")
    lines += [
        "\n[bold]Next steps:[/]",
        f"  cd {escape(str(dest))}",
        '  pip install -e ".\\[test]"   [dim]# openenv-runtime is already in this environment[/]',
        "  pytest                     [dim]# a real episode through a real server[/]",
        "  openenv validate           [dim]# what CI checks[/]",
        "  openenv serve              [dim]# http://127.0.0.1:8000[/]",
    ]
    # One print, no highlighting or emoji codes: file names print as they are (and fast).
    console.print("\n".join(lines), highlight=False, emoji=False)
