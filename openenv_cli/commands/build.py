"""``openenv build``: build the project's Docker image through the Docker Engine API."""

from __future__ import annotations

import tempfile
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.spinner import Spinner
from rich.text import Text

from openenv_cli.commands.options import BaseImage, DryRun, IncludeSecret
from openenv_cli.console import console
from openenv_cli.errors import UsageError
from openenv_cli.image import TAG_ENV

if TYPE_CHECKING:  # the engine (docker) and the manifest load only when a build runs
    from openenv_cli.image.context import ContextFolder
    from openenv_cli.image.engine import BuildResult
    from openenv_cli.image.plan import BuildPlan
    from openenv_cli.image.stream import BuildEvent, BuildStep

TAIL_LINES = 8


def command(
    path: Annotated[
        Path, typer.Argument(help="The project folder (with openenv.yaml).", file_okay=False)
    ] = Path("."),
    tag: Annotated[
        list[str] | None,
        typer.Option(
            "--tag",
            "-t",
            metavar="TAG",
            help=f"Image tag, repeatable (env {TAG_ENV}; build.tag; default <name>:<version> and <name>:latest).",
        ),
    ] = None,
    base_image: BaseImage = None,
    build_arg: Annotated[
        list[str] | None,
        typer.Option(
            "--build-arg",
            metavar="NAME=VALUE",
            help="Build argument (a bare NAME takes $NAME), repeatable.",
        ),
    ] = None,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            show_default=False,
            help="Build every layer again, ignoring the engine's cache.",
        ),
    ] = False,
    platform: Annotated[
        str | None, typer.Option(metavar="OS/ARCH", help="Target platform, e.g. linux/amd64.")
    ] = None,
    dockerfile: Annotated[
        str | None,
        typer.Option(
            "--dockerfile",
            "-f",
            metavar="PATH",
            help="The Dockerfile, relative to the project \\[openenv.yaml build.dockerfile; default server/Dockerfile].",
            show_default=False,
        ),
    ] = None,
    include_secret: IncludeSecret = None,
    dry_run: DryRun = False,
    context_dir: Annotated[
        Path | None,
        typer.Option(
            "--context-dir",
            metavar="DIR",
            file_okay=False,
            help="Write the exact build context (project, runtime in _openenv_runtime/, Dockerfile at the root) to DIR, new or empty, and build nothing: then any builder works (`docker build DIR`, buildx, kaniko, CI).",
            show_default=False,
        ),
    ] = None,
    context: Annotated[str | None, typer.Option("--context", "-c", hidden=True)] = None,
) -> None:
    """Build the Docker image of the environment in PATH.

    The build context is the project (minus what .gitignore and .dockerignore exclude) plus the runtime this CLI runs with, in [bold]_openenv_runtime/[/], so the image serves with exactly this runtime version. A plain `docker build -f server/Dockerfile .` lacks that folder: use --context-dir DIR, then build DIR with any builder.

    Never in the context: symbolic links leading out of the project, hard links, and secrets (.env*, .netrc, .aws/, .ssh/, *.pem, id_rsa*, terraform state, shell histories, ..., and any file holding a private key or a token) unless named with --include-secret; what is left out is listed, and so is every secret that ships.

    Needs a Docker engine (DOCKER_HOST is honoured); the log is streamed as the engine builds.
    """
    if context is not None:
        raise UsageError(
            "The build context of openenv build is always the project folder (PATH) plus the runtime; --context is not supported.",
            hint="Shape the context with .dockerignore (or .gitignore), and choose the Dockerfile with --dockerfile; --context-dir DIR writes the context for another builder.",
        )
    from openenv_cli.image.engine import build_image, connect, stage_for_build
    from openenv_cli.image.plan import plan_build
    from openenv_cli.image.task_base import build_task_base

    plan = plan_build(
        path,
        tags=tag or (),
        base_image=base_image,
        build_args=build_arg or (),
        no_cache=no_cache,
        platform=platform,
        dockerfile=dockerfile,
        include_secrets=include_secret or (),
    )
    if context_dir is not None:
        write_context(plan, context_dir)
        return
    with tempfile.TemporaryDirectory(prefix="openenv-build-") as folder:
        staged = stage_for_build(plan, Path(folder) / "context")
        print_plan(plan, staged, every_left_out=dry_run)
        if dry_run:
            print_context(staged)
            return
        build_task_base(plan)
        client = connect()
        try:
            display = BuildDisplay(console)
            with display:
                result = build_image(plan, client, staged, display.on_event)
        finally:
            client.close()
    print_result(plan, result)


def print_plan(
    plan: BuildPlan, context: ContextFolder, *, every_left_out: bool = False, verb: str = "Building"
) -> None:
    from openenv_cli.image.engine import human_size

    console.print(
        f"[bold]{verb}[/] {escape(plan.tag)} from {escape(plan.dockerfile)} "
        f"(base image {escape(plan.base_image.value)}, from {escape(plan.base_image.origin or plan.base_image.source)})",
        highlight=False,
    )
    runtime = plan.labels.get("io.openenv.runtime.version", "?")
    console.print(
        f"  context {len(context.files)} files, {human_size(context.size)} (with openenv-runtime {escape(runtime)})"
        + ("; no cache" if plan.no_cache else "")
        + (f"; platform {escape(plan.platform)}" if plan.platform else ""),
        highlight=False,
        style="dim",
    )

    from openenv_cli.commands.push_output import show_secrets_shipped

    show_secrets_shipped(context.secrets_shipped, indent="  ")
    # Secrets and links always: a missing file must never be a surprise.
    shown = [
        i for i in context.left_out if every_left_out or i.kind in {"secret", "link", "not a file"}
    ]
    if shown:
        console.print(f"  left out of the context ({len(shown)}):", highlight=False, style="dim")
    for item in shown:
        console.print(
            f"    {escape(item.path)}  [dim]{escape(item.kind)}: {escape(item.reason)}[/]",
            highlight=False,
            soft_wrap=True,
        )


def write_context(plan: BuildPlan, dest: Path) -> None:
    """``--context-dir``: write the context to ``dest`` and say how to build it."""
    from openenv_cli.image.engine import export_context, external_build_command

    staged = export_context(plan, dest)
    print_plan(plan, staged, verb="Staging the context of")
    console.print(
        f"[bold green]Wrote[/] the build context to {escape(str(staged.root))} "
        f"({len(staged.files)} files, Dockerfile at its root). Build it with any builder:",
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"  {escape(external_build_command(plan, staged))}", highlight=False, soft_wrap=True
    )


def print_context(context: ContextFolder) -> None:
    """The files of a staged context (``--dry-run``), the runtime bundle as one line."""
    from openenv_cli.image.selection import RUNTIME_DIR

    runtime = [f for f in context.files if f.startswith(RUNTIME_DIR + "/")]
    console.print(f"[bold]Context[/] ({len(context.files)} files):")
    for name in context.files:
        if not name.startswith(RUNTIME_DIR + "/"):
            console.print(f"  {escape(name)}", highlight=False, soft_wrap=True)
    console.print(f"  {RUNTIME_DIR}/  [dim]({len(runtime)} files)[/]", highlight=False)
    console.print("[bold]Dry run:[/] nothing was built.")


def print_result(plan: BuildPlan, result: BuildResult) -> None:
    from openenv_cli.image.engine import human_size

    for warning in result.warnings:
        console.print(f"[yellow]Warning:[/] {escape(warning)}", highlight=False)
    also = (
        f" (also {', '.join(escape(t) for t in result.tags[1:])})" if len(result.tags) > 1 else ""
    )
    console.print(
        f"[green]Built[/] image {result.short_id}{also}: {len(result.steps)} steps, {result.cached_steps} cached, "
        f"in {result.seconds:.1f}s",
        highlight=False,
    )
    console.print(
        f"[bold green]{escape(plan.tag)}[/] ({human_size(result.size)}). Run it: [bold]{escape(plan.run_command())}[/]",
        highlight=False,
    )


class BuildDisplay:
    """Shows the build as it runs: on a terminal a live step line and the last lines of output
    (finished steps stay above it); elsewhere (CI, pipes) the plain log, streamed."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self.live_mode = out.is_terminal
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.step: BuildStep | None = None
        self.status = ""
        self.spinner = Spinner("dots")
        self.live: Live | None = None

    def __enter__(self) -> BuildDisplay:
        if self.live_mode:
            self.live = Live(
                self._render(),
                console=self.out,
                refresh_per_second=8,
                transient=True,
                get_renderable=self._render,
            )
            self.live.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.live is not None:
            self.live.__exit__(*exc_info)  # type: ignore[arg-type]
            self.live = None
        if exc_info[0] is None:
            self._finish_step()

    def on_event(self, event: BuildEvent) -> None:
        if event.kind == "step" and event.step is not None:
            self._finish_step()
            self.step = event.step
            self.tail.clear()
            self.status = ""
            if not self.live_mode:
                self.out.print(
                    f"[bold]Step {event.step.number}/{event.step.total}[/] {escape(event.step.instruction)}",
                    highlight=False,
                    soft_wrap=True,
                )
        elif event.kind == "cached":
            if not self.live_mode:
                self.out.print("  [dim](cached)[/]")
        elif event.kind == "output":
            self.tail.append(event.text)
            if not self.live_mode:
                self.out.print(Text("  " + event.text, style="dim"), soft_wrap=True)
        elif event.kind == "status":
            self.status = event.text
            if not self.live_mode and "progress" not in event.text and "[" not in event.text:
                self.out.print(Text("  " + event.text, style="dim"), soft_wrap=True)
        elif event.kind == "warning" and not self.live_mode:
            self.out.print(f"  [yellow]{escape(event.text)}[/]", highlight=False)

    def _finish_step(self) -> None:
        step, self.step = self.step, None
        if step is None or not self.live_mode:
            return
        took = "cached" if step.cached else f"{step.duration:.1f}s"
        self.out.print(
            f"[green]✓[/] Step {step.number}/{step.total} {escape(_short(step.instruction, self.out.width - 30))} [dim]({took})[/]",
            highlight=False,
        )

    def _render(self) -> Group:
        step = self.step
        if step is None:
            self.spinner.text = Text("Sending the build context")
        else:
            elapsed = time.monotonic() - step.started
            self.spinner.text = Text.assemble(
                (f"Step {step.number}/{step.total} ", "bold"),
                _short(step.instruction, self.out.width - 30),
                (f"  {elapsed:.0f}s", "dim"),
            )
        lines = [Text("    " + _short(line, self.out.width - 6), style="dim") for line in self.tail]
        if self.status:
            lines.append(Text("    " + _short(self.status, self.out.width - 6), style="dim"))
        return Group(self.spinner, *lines)


def _short(text: str, width: int) -> str:
    width = max(width, 20)
    return text if len(text) <= width else text[: width - 1] + "…"
