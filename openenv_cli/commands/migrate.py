"""``openenv migrate``: port a project written for the reference OpenEnv."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from openenv_cli.console import console, err_console, visible
from openenv_cli.errors import OpenEnvError
from openenv_cli.migrate import apply_migration, plan_migration
from openenv_cli.scaffold import render_project


def command(
    path: Annotated[
        Path, typer.Argument(help="The project folder to rewrite in place.", file_okay=False)
    ] = Path("."),
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the diff; change nothing.")
    ] = False,
) -> None:
    """Rewrite a project written for the reference OpenEnv (openenv.core) to run on openenv-runtime.

    Imports, the pyproject dependency, the Dockerfile and openenv.yaml are rewritten in place
    (--dry-run shows the diff instead); what cannot be translated is listed.
    """
    if not path.is_dir():
        raise OpenEnvError(
            f"{path} is not a folder.", hint="Pass the project folder (with openenv.yaml)."
        )
    name = path.resolve().name
    # the folder name is rendered into the Dockerfile: only a package name may get there
    dockerfile = render_project(name).get("server/Dockerfile") if name.isidentifier() else None
    plan = plan_migration(path, dockerfile)
    if dry_run:
        # raw, never wrapped or styled: piped to a file, it applies with `git apply` / `patch -p1`
        diff = plan.diff()
        if diff:
            sys.stdout.write(visible(diff))
            sys.stdout.flush()
        else:
            console.print("Nothing to change.")
    else:
        apply_migration(plan)
        for change in plan.changes:
            console.print(f"rewrote {escape(visible(str(change.path.relative_to(plan.root))))}")
        if not plan.changes:
            console.print("Nothing to change: the project already uses openenv_runtime.")
    for note in plan.notes:
        err_console.print(
            f"[yellow]note:[/yellow] {escape(visible(note))}", highlight=False, soft_wrap=True
        )
    if not dry_run and plan.changes:
        console.print("Next: `openenv validate` then `openenv serve`.")
