"""The ``openenv`` command line: wires one module per verb and renders errors.

Adding a verb: write ``openenv_cli/commands/<verb>.py`` with a ``command`` function (Typer
options in its signature, a docstring for the help), then register it below with one line.
"""

from __future__ import annotations

import sys
from importlib import metadata
from typing import Annotated

import typer

from openenv_cli.commands import bench, build, init, migrate, push, serve, validate
from openenv_cli.console import debug_enabled, err_console, set_debug
from openenv_cli.errors import OpenEnvError, render_error

app = typer.Typer(
    name="openenv",
    help="Create, validate, serve, build, deploy and benchmark OpenEnv-compatible RL environments.",
    rich_markup_mode="rich",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    add_completion=False,
)

app.command(name="init")(init.command)
app.command(name="validate")(validate.command)
app.command(name="serve")(serve.command)
app.command(name="build")(build.command)
app.command(name="push")(push.command)
app.command(name="bench")(bench.command)
app.command(name="migrate")(migrate.command)


def _version() -> str:
    try:
        cli = metadata.version("openenv-toolkit")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        from openenv_cli import __version__ as cli
    try:
        runtime = metadata.version("openenv-runtime")
    except metadata.PackageNotFoundError:
        runtime = "not installed"
    return f"openenv {cli} (runtime {runtime}, Python {sys.version.split()[0]})"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(_version())
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool | None,
        typer.Option(
            "--version",
            "-V",
            callback=_show_version,
            is_eager=True,
            help="Show the version and exit.",
        ),
    ] = None,
    debug: Annotated[
        bool,
        typer.Option("--debug", envvar="OPENENV_DEBUG", help="Show full tracebacks on errors."),
    ] = False,
) -> None:
    set_debug(debug)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the app, render :class:`OpenEnvError` once, set the exit code."""
    if argv is None and "--debug" in sys.argv[1:]:
        set_debug(True)  # so errors raised before the callback runs still get a traceback
    try:
        app(args=argv, prog_name="openenv")
    except OpenEnvError as error:
        if debug_enabled():
            err_console.print_exception()
        render_error(error, err_console)
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        err_console.print("[red]Interrupted.[/]")
        sys.exit(130)
    except Exception as error:  # a bug: say so briefly, unless asked for the traceback
        if debug_enabled():
            err_console.print_exception()
        render_error(
            OpenEnvError(
                f"Unexpected {type(error).__name__}: {error}",
                hint="Run again with --debug (or OPENENV_DEBUG=1) for the traceback, and report it if it is a bug.",
            ),
            err_console,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
