"""What ``openenv push`` prints: the dry run's plan, what is left out, the Space it made."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from openenv_cli.console import console

if TYPE_CHECKING:
    from openenv_cli.hub.deploy import PushResult
    from openenv_cli.hub.upload import PushPlan
    from openenv_cli.image.selection import LeftOut, ShippedSecret


def show_left_out(left_out: tuple[LeftOut, ...], *, brief: bool) -> None:
    """What the project has and the upload does not: secrets and links always (they may
    surprise), the rest in the dry run."""
    shown = [i for i in left_out if not brief or i.kind in {"secret", "link", "not a file"}]
    if not shown:
        return
    console.print(f"[bold]Left out[/] ({len(shown)}):", highlight=False)
    for item in shown:
        console.print(
            f"  {escape(item.path)}  [dim]{escape(item.kind)}: {escape(item.reason)}[/]",
            highlight=False,
            soft_wrap=True,
        )


def show_secrets_shipped(shipped: tuple[ShippedSecret, ...], indent: str = "") -> None:
    """The files that match a secret rule and ship because --include-secret named them."""
    if not shipped:
        return
    console.print(
        f"{indent}[bold yellow]Secrets shipped[/] ({len(shipped)}, named with --include-secret):",
        highlight=False,
    )
    for item in shipped:
        console.print(
            f"{indent}  {escape(item.path)}  [dim]{escape(item.reason)}[/]",
            highlight=False,
            soft_wrap=True,
        )


def show_plan(plan: PushPlan) -> None:
    """The dry run: the Space, every file with its size, what is left out, front matter, Dockerfile."""
    from openenv_cli.hub.space import render_front_matter
    from openenv_cli.image.engine import human_size
    from openenv_cli.image.selection import RUNTIME_DIR

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
    if plan.hardware:
        console.print(f"Hardware: {escape(plan.hardware)}", highlight=False)
    console.print(f"\n[bold]Files[/] ({len(sizes)}, {human_size(sum(sizes.values()))}):")
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
            f"  {escape(name.ljust(width))}  {human_size(listed[name]):>9}{extra}",
            highlight=False,
            soft_wrap=True,
        )
    console.print()
    show_secrets_shipped(plan.staged.secrets_shipped)
    show_left_out(plan.staged.left_out, brief=False)
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


def show_result(result: PushResult) -> None:
    """What the push did to the Space, and where to find it."""

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
    if result.hardware:
        say(f"  hardware requested: {escape(result.hardware)}")
    if result.commit is None:
        say("  no file changed: no new commit")
    else:
        deleted = f", deleted {len(result.deleted)}" if result.deleted else ""
        say(f"  uploaded the changed files of {result.sent}{deleted} in commit {result.commit[:8]}")
        if len(result.deleted) <= 10:
            for name in result.deleted:
                say(f"    {escape(name)} (deleted)", style="dim")
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
