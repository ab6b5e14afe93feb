"""``openenv push``: deploy the project to a Hugging Face Docker Space."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from openenv_cli.console import console
from openenv_cli.errors import UsageError

if TYPE_CHECKING:
    from openenv_cli.push import PushPlan, PushResult


def command(
    path: Annotated[Path, typer.Argument(help="The project folder (with openenv.yaml).")] = Path(
        "."
    ),
    repo_id: Annotated[
        str | None,
        typer.Option(
            "--repo-id",
            help="The Space, NAMESPACE/NAME; a bare NAME goes to your namespace \\[openenv.yaml push.repo_id; default <your user>/<name>].",
            show_default=False,
        ),
    ] = None,
    private: Annotated[
        bool | None,
        typer.Option(
            "--private/--public",
            help="Make the Space private or public, also when it exists \\[default: new Spaces follow push.private; existing ones keep theirs].",
            show_default=False,
        ),
    ] = None,
    base_image: Annotated[
        str | None,
        typer.Option(
            "--base-image",
            help="Build the Space on this image instead of the Dockerfile's Python base.",
            show_default=False,
        ),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            "-e",
            help="A Space variable KEY=VALUE (repeatable); added to openenv.yaml push.variables.",
            show_default=False,
        ),
    ] = None,
    secret: Annotated[
        list[str] | None,
        typer.Option(
            "--secret",
            help="A Space secret KEY=VALUE, or KEY to read $KEY (repeatable). Never shown or stored.",
            show_default=False,
        ),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude",
            help="A gitignore-style pattern not to upload (repeatable); added to push.exclude.",
            show_default=False,
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            help="Hugging Face token \\[default: $HF_TOKEN, then the `hf auth login` token].",
            show_default=False,
        ),
    ] = None,
    no_interface: Annotated[
        bool,
        typer.Option(
            "--no-interface",
            help="Turn the web interface off (no /web base path, ENABLE_WEB_INTERFACE=false).",
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Show the files, front matter and Dockerfile that would be uploaded; contact nobody.",
        ),
    ] = False,
) -> None:
    """Deploy the project to a Hugging Face Docker Space.

    Uploads the project (honouring .gitignore, .dockerignore and --exclude; never .git, .env, virtualenvs, caches or other tools' lock files) with its Dockerfile at the root, the runtime this CLI uses in [bold]_openenv_runtime/[/], and a README whose front matter configures the Space.

    Creates the Space when needed, sets its variables and secrets on every push, and commits only what changed (files no longer shipped are deleted). The Hub is [bold]$HF_ENDPOINT[/] (default https://huggingface.co).
    """
    from openenv_cli.config import parse_assignments
    from openenv_cli.manifest import load_manifest
    from openenv_cli.push import (
        Redactor,
        deploy,
        prepare_push,
        redacting,
        resolve_token,
    )

    if not path.is_dir():
        raise UsageError(
            f"{path} is not a folder.",
            hint="Pass the project folder: `openenv push path/to/my_env`.",
        )
    secrets = parse_assignments(secret or [], "--secret", secret=True)
    redactor = Redactor(secrets.values())
    redactor.add(token)
    with redacting(redactor):
        variables = parse_assignments(env or [], "-e")
        manifest = load_manifest(path)
        with tempfile.TemporaryDirectory(prefix="openenv-push-") as tmp:
            plan = prepare_push(
                path,
                Path(tmp) / "space",
                manifest=manifest,
                repo_id=repo_id,
                base_image=base_image,
                variables=variables,
                secrets=secrets,
                excludes=exclude or [],
                private=private,
                no_interface=no_interface,
            )
            if dry_run:
                _show_plan(plan)
                return
            found, source = resolve_token(token)
            redactor.add(found)
            console.print(
                f"Staged {len(plan.staged.files)} files (Dockerfile at the root, openenv-runtime {plan.staged.runtime_version}).",
                highlight=False,
                soft_wrap=True,
            )
            with console.status(f"Deploying to {escape(plan.repo.shown())} ..."):
                result = deploy(plan, found, token_source=source)
    _show_result(result)


def _size(n: int) -> str:
    return (
        f"{n} B"
        if n < 1024
        else f"{n / 1024:.1f} KB"
        if n < 1024 * 1024
        else f"{n / 1024 / 1024:.1f} MB"
    )


def _show_plan(plan: PushPlan) -> None:
    from openenv_cli.push import render_front_matter
    from openenv_cli.staging import RUNTIME_DIR

    root = plan.staged.root
    sizes = {f: (root / f).stat().st_size for f in plan.staged.files}
    console.print("[bold]Dry run:[/] nothing is uploaded and no request is made.\n")
    visibility = {
        True: "private",
        False: "public",
        None: "private for a new Space" if plan.create_private else "public for a new Space",
    }
    shown = visibility[plan.private]
    if plan.private is None:
        shown += "; an existing Space keeps its visibility"
    console.print(f"Space: [bold]{escape(plan.repo.shown())}[/] ({shown})", highlight=False)
    console.print(f"\n[bold]Files[/] ({len(sizes)}, {_size(sum(sizes.values()))}):")
    runtime = {f: n for f, n in sizes.items() if f.startswith(RUNTIME_DIR + "/")}
    listed = {f: n for f, n in sizes.items() if f not in runtime}
    if runtime:
        listed[RUNTIME_DIR + "/"] = sum(runtime.values())
    width = max(len(f) for f in listed)
    for name in sorted(listed):
        extra = (
            f"  (openenv-runtime {plan.staged.runtime_version}, {len(runtime)} files)"
            if name == RUNTIME_DIR + "/"
            else ""
        )
        console.print(
            f"  {escape(name.ljust(width))}  {_size(listed[name]):>9}{extra}",
            highlight=False,
            soft_wrap=True,
        )
    console.print("\n[bold]README.md front matter:[/]")
    console.print(
        escape(render_front_matter(plan.front_matter)), highlight=False, end="", soft_wrap=True
    )
    console.print(
        f"\n[bold]Dockerfile[/] (at the root, from {escape(plan.manifest.build.dockerfile)}):"
    )
    console.print(
        escape(plan.staged.dockerfile_text),
        highlight=False,
        soft_wrap=True,
        end="" if plan.staged.dockerfile_text.endswith("\n") else "\n",
    )
    console.print("\n[bold]Variables:[/]")
    for key, value in plan.variables.items():
        console.print(f"  {escape(key)}={escape(value)}", highlight=False, soft_wrap=True)
    if plan.secrets:
        console.print(
            "[bold]Secrets:[/] " + ", ".join(f"{escape(k)}=***" for k in plan.secrets),
            highlight=False,
        )


def _show_result(result: PushResult) -> None:
    def say(text: str, style: str | None = None) -> None:
        console.print(text, highlight=False, soft_wrap=True, style=style)

    verb = "Created" if result.created else "Updated"
    say(
        f"[green]{verb}[/] the Space [bold]{escape(result.repo_id)}[/] ({'private' if result.private else 'public'})."
    )
    if result.visibility_changed and not result.created:
        say(f"  visibility changed to {'private' if result.private else 'public'}")
    for note in result.notes:
        say(f"  [yellow]Note:[/] {escape(note)}")
    say(
        "  variables set: " + ", ".join(escape(k) for k in result.variables_set)
        if result.variables_set
        else "  variables unchanged"
    )
    if result.secrets_set:
        say("  secrets set: " + ", ".join(escape(k) for k in result.secrets_set))
    if result.commit is None:
        say("  no file changed: no new commit")
    else:
        deleted = f", deleted {len(result.deleted)}" if result.deleted else ""
        say(f"  uploaded {len(result.uploaded)} file(s){deleted} in commit {result.commit[:8]}")
        changed = [*result.uploaded, *(f"{p} (deleted)" for p in result.deleted)]
        if len(changed) <= 10:
            for name in changed:
                say(f"    {escape(name)}", style="dim")
    urls = result.urls
    say("")
    say(f"Space page:  {escape(urls.page)}")
    say(f"App:         {escape(urls.app)}")
    say(f"WebSocket:   {escape(urls.websocket)}")
    say(f"Client:      {escape(urls.pip)}")
    say(f"             [dim]without openenv installed: {escape(urls.pip_with_runtime)}[/]")
    say(f"Image:       {escape(urls.docker)}")
    if result.commit is not None:
        say("\nThe Space is building; follow it on the Space page.", style="dim")
