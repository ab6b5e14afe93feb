"""``openenv import``: write a project that serves a library's environment (FAMILY:NAME)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from openenv_cli.errors import UsageError
from openenv_cli.licenses import DEFAULT_LICENSE


def command(
    target: Annotated[
        str,
        typer.Argument(
            help="The family target: gymnasium:CartPole-v1, reasoning_gym:leg_counting?seed=3, "
            "textarena:GuessTheNumber-v0, harbor:/abs/path/to/task (quote it when it has a "
            "?query).",
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
    """Write a project that serves a library's environment or a Harbor task.

    The families: Gymnasium, reasoning-gym, TextArena, verifiers, and Harbor task folders
    (the task runs inside its own image).

    The project is an ordinary one ([bold]openenv validate[/], [bold]build[/] and
    [bold]push[/] take it): [bold]models.py[/] names the classes the runtime adapts from the
    library, [bold]server/app.py[/] serves them, [bold]openenv.yaml[/] and
    [bold]pyproject.toml[/] pin the library's installed version, with a Dockerfile and tests.
    A Harbor task folder is copied to [bold]task/[/], and the image starts from the task's own
    ([bold]openenv build[/] builds task/environment/ first).
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
) -> tuple[dict[str, str | bytes], str]:
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
    from openenv_runtime.adapters.target import FAMILIES, FamilyTarget, load_family
    from openenv_runtime.errors import AdapterError

    parsed = parse_target(target)
    if parsed.family is None:
        known = ", ".join(f"{family}:NAME" for family in FAMILIES)
        raise UsageError(
            f"{target!r} is not a family target.",
            hint=f"Give one of {known}, e.g. gymnasium:CartPole-v1.",
        )
    family = parsed.family
    context: dict[str, Any] = {}
    if family.family == "harbor":
        # Served from inside the task's own image: no Docker engine needed, here or there.
        options = {k: v for k, v in family.options.items() if k not in {"warm", "executor"}}
        family = FamilyTarget("harbor", family.name, {**options, "executor": "local"})
        context["harbor_options"] = repr(family.options)
    try:
        adapted = load_family(family)
    except AdapterError as exc:
        raise UsageError(str(exc), hint="Fix the target, or install the extra named.") from None
    project = name or family_project_name(Path(family.name).name)
    if not project:
        raise UsageError(
            f"No project name can be made from {parsed.family.name!r}.", hint="Pass --name NAME."
        )
    validate_project_name(project)
    if family.family == "harbor":
        context["base_image"] = f"openenv-harbor-task/{project}:latest"
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
    files: dict[str, str | bytes] = {
        **render_family_project(
            project, facts, {"license": spdx, "license_file": text is not None, **context}
        )
    }
    if family.family == "harbor":
        files.update(task_files(Path(family.name)))
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


TASK_FOLDER = "task"


def task_files(root: Path) -> dict[str, str | bytes]:
    """The Harbor task folder ``root`` as project files under ``task/``.

    Read through the safe file helpers: a symbolic link anywhere in the folder is refused
    (it could lead outside the folder, and the image would not have what it points at), as
    is anything but regular files and folders; sizes are bounded as the adapter bounds them.
    """
    import os

    from openenv_cli.safe_files import UnsafePathError, read_inside
    from openenv_runtime.adapters.harbor_task import MAX_ARCHIVE_BYTES, MAX_ARCHIVE_FILES

    files: dict[str, str | bytes] = {}
    total = 0
    for folder, subfolders, names in os.walk(root, followlinks=False):
        subfolders.sort()
        for entry in sorted([*subfolders, *names]):
            path = Path(folder) / entry
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                raise UsageError(
                    f"{path} is a symbolic link: openenv import copies a task folder's own "
                    "files only (a link could lead outside it).",
                    hint="Replace the link with the file or folder it points at, then import again.",
                )
            if path.is_dir():
                continue
            if len(files) >= MAX_ARCHIVE_FILES:
                raise UsageError(f"{root} has over {MAX_ARCHIVE_FILES} files.", hint="Trim it.")
            try:
                data = read_inside(root, relative)
            except UnsafePathError as exc:
                raise UsageError(
                    str(exc), hint="Keep only regular files in the task folder."
                ) from None
            total += len(data)
            if total > MAX_ARCHIVE_BYTES:
                raise UsageError(f"{root} is over {MAX_ARCHIVE_BYTES} bytes.", hint="Trim it.")
            files[f"{TASK_FOLDER}/{relative}"] = data
    return files
