"""``openenv import``: write a project that serves a library's environment (FAMILY:NAME)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from openenv_cli.errors import UsageError
from openenv_cli.licenses import DEFAULT_LICENSE


def command(
    target: Annotated[
        str,
        typer.Argument(
            help="The family target: gymnasium:CartPole-v1, reasoning_gym:leg_counting?seed=3, "
            "textarena:GuessTheNumber-v0 (quote it when it has a ?query).",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="The project folder to write [default: ./NAME].",
            file_okay=False,
            show_default=False,
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            "-n",
            help="Project and package name [default: the --out folder's name when it is a valid "
            "one, else from the environment's name, e.g. cart_pole_v1].",
            show_default=False,
        ),
    ] = None,
    license_: Annotated[
        str,
        typer.Option(
            "--license", "-l", metavar="SPDX", help="The project's licence, as `openenv init`'s."
        ),
    ] = DEFAULT_LICENSE,
    force: Annotated[
        bool,
        typer.Option(
            "--force", "-f", help="Write into an existing non-empty folder, replacing its files."
        ),
    ] = False,
) -> None:
    """Write a project that serves a library's environment: Gymnasium, reasoning-gym, TextArena.

    The project is an ordinary one ([bold]openenv validate[/], [bold]build[/] and
    [bold]push[/] take it): [bold]models.py[/] names the classes the runtime adapts from the
    library, [bold]server/app.py[/] serves them, [bold]openenv.yaml[/] and
    [bold]pyproject.toml[/] pin the library's installed version, with a Dockerfile and tests.
    """
    from rich.markup import escape

    from openenv_cli.console import console

    files, project = import_project(target, name=name or _folder_name(out), license_=license_)
    dest = out if out is not None else Path(project)
    from openenv_cli.scaffold import write_project

    write_project(files, dest, force=force)
    lines = [f"[green]Imported[/] {escape(target)} into {escape(str(dest))}/ ({len(files)} files)"]
    lines += [f"[dim]  {escape(relative)}[/]" for relative in sorted(files)]
    lines += [
        "\n[bold]Next steps:[/]",
        f"  cd {escape(str(dest))}",
        '  pip install -e ".\\[test]"',
        "  openenv validate",
        "  openenv serve",
    ]
    console.print("\n".join(lines), highlight=False, emoji=False)


def _folder_name(out: Path | None) -> str | None:
    """``out``'s name when it makes a valid project name: the folder is the package, and
    servers of the project import it by that name."""
    from openenv_cli.errors import OpenEnvError
    from openenv_cli.scaffold import validate_project_name

    if out is None:
        return None
    try:
        validate_project_name(out.resolve().name)
    except OpenEnvError:
        return None
    return out.resolve().name


def import_project(
    target: str, *, name: str | None = None, license_: str = DEFAULT_LICENSE
) -> tuple[dict[str, str], str]:
    """The files of the project for ``target`` and its name (the library is imported here)."""
    import datetime
    import json

    from openenv_cli.licenses import canonical_license, license_text
    from openenv_cli.scaffold import (
        FamilyFacts,
        family_project_name,
        project_context,
        render_family_project,
        template_root,
        validate_project_name,
    )
    from openenv_cli.targets import parse_target
    from openenv_cli.validation.contract import LOCK_FILE, build_lock
    from openenv_cli.validation.example import example_action
    from openenv_runtime.adapters.target import FAMILIES, load_family
    from openenv_runtime.errors import AdapterError

    parsed = parse_target(target)
    if parsed.family is None:
        known = ", ".join(f"{family}:NAME" for family in FAMILIES)
        raise UsageError(
            f"{target!r} is not a family target.",
            hint=f"Give one of {known}, e.g. gymnasium:CartPole-v1.",
        )
    if not FAMILIES[parsed.family.family].importable:
        raise UsageError(
            f"{parsed.family.family} targets are not imported: the task folder is the project.",
            hint=f"Serve it as it is: openenv serve {parsed}",
        )
    try:
        adapted = load_family(parsed.family)
    except AdapterError as exc:
        raise UsageError(str(exc), hint="Fix the target, or install the extra named.") from None
    project = name or family_project_name(parsed.family.name)
    if not project:
        raise UsageError(
            f"No project name can be made from {parsed.family.name!r}.", hint="Pass --name NAME."
        )
    validate_project_name(project)
    facts = FamilyFacts(
        target=str(parsed),
        family=parsed.family.family,
        extra=FAMILIES[parsed.family.family].extra,
        package=adapted.package,
        package_version=adapted.package_version,
        description=" ".join(adapted.description.split())
        or f"{parsed}, served over the OpenEnv protocol.",
        example_action=example_action(adapted.action_cls.model_json_schema()),
    )
    spdx = canonical_license(license_)
    text = None
    if spdx is not None:
        title = project_context(project)["title"]
        text = license_text(
            spdx, template_root(), holder=f"the {title} authors", year=datetime.date.today().year
        )
    files = render_family_project(
        project, facts, {"license": spdx, "license_file": text is not None}
    )
    if text is not None:
        files["LICENSE"] = text
    # The schemas clients rely on, recorded now: `openenv validate` says when an upgrade of
    # the library changes them.
    schemas = {
        "action": adapted.action_cls.model_json_schema(),
        "observation": adapted.observation_cls.model_json_schema(),
        "state": adapted.state_cls.model_json_schema(),
    }
    lock = build_lock(schemas, project, project_context(project)["version"])
    files[LOCK_FILE] = json.dumps(lock, indent=2, sort_keys=True) + "\n"
    return files, project
