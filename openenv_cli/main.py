"""The ``openenv`` command line: wires one module per verb and renders errors.

Adding a verb: write ``openenv_cli/commands/<verb>.py`` with a ``command`` function (Typer
options in its signature, a docstring for the help) and add one :class:`Verb` line to
``VERBS`` below: its module, the one-line summary ``openenv --help`` lists, and two or three
examples shown at the end of ``openenv <verb> --help``.

Commands load lazily: ``openenv --help`` imports no command module, and ``openenv <verb>``
imports only that verb's module, so the CLI starts in about a tenth of a second
(``benchmarks/cli/cli_startup.py`` measures it). Keep heavy imports (docker, huggingface_hub,
the manifest model, the bench engine) inside the functions that use them.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

HELP = "Create, validate, serve, build, deploy and benchmark OpenEnv-compatible RL environments."


@dataclass(frozen=True)
class Verb:
    """One command: where it lives, its line in ``openenv --help``, and its help's examples."""

    module: str
    summary: str
    examples: tuple[str, ...]


VERBS: dict[str, Verb] = {
    "init": Verb(
        "openenv_cli.commands.init",
        "Create a new environment project NAME: models, client, server, Dockerfile, tests.",
        (
            "openenv init my_env",
            'openenv init maze_env -o envs -d "A grid maze" --license MIT',
            "openenv init grid_world --license Apache-2.0",
        ),
    ),
    "import": Verb(
        "openenv_cli.commands.import_",
        "Write a project that serves a library's environment or a Harbor task.",
        (
            "openenv import gymnasium:CartPole-v1 --out cart_pole",
            "openenv import 'reasoning_gym:leg_counting?size=500&seed=3' --name legs",
            "openenv import textarena:GuessTheNumber-v0 -o guess && openenv validate guess",
        ),
    ),
    "validate": Verb(
        "openenv_cli.commands.validate",
        "Check an environment project, a family target, or with --url a running server, the way CI would.",
        (
            "openenv validate gymnasium:CartPole-v1",
            "openenv validate path/to/my_env --json --no-smoke",
            "openenv validate --url http://127.0.0.1:8000",
        ),
    ),
    "serve": Verb(
        "openenv_cli.commands.serve",
        "Serve the environment in PATH on uvicorn until Ctrl-C.",
        (
            "openenv serve",
            "openenv serve path/to/my_env --port 8080 --reload",
            "openenv serve --workers 4 --max-concurrent-envs 500",
        ),
    ),
    "build": Verb(
        "openenv_cli.commands.build",
        "Build the Docker image of the environment in PATH.",
        (
            "openenv build",
            "openenv build -t my_env:dev --no-cache",
            "openenv build --base-image python:3.12-slim --platform linux/amd64",
        ),
    ),
    "push": Verb(
        "openenv_cli.commands.push",
        "Deploy the project to a Hugging Face Docker Space.",
        (
            "openenv push --dry-run",
            "openenv push --repo-id my-org/my_env --private",
            "openenv push -e LOG_LEVEL=debug --secret API_KEY",
        ),
    ),
    "fork": Verb(
        "openenv_cli.commands.fork",
        "Copy a Hugging Face Space (an environment) into your namespace.",
        (
            "openenv fork openenv/echo_env",
            "openenv fork openenv/echo_env --repo-id my-org/echo --private -H t4-small",
            "openenv fork alice/chat_env -e MODEL_ID=my/model --secret API_KEY",
        ),
    ),
    "discover": Verb(
        "openenv_cli.commands.discover",
        "List environment Spaces on the Hugging Face Hub with their version and hardware.",
        (
            "openenv discover",
            "openenv discover echo --limit 50 --sort updated",
            "openenv discover --author my-org --json --no-versions",
        ),
    ),
    "migrate": Verb(
        "openenv_cli.commands.migrate",
        "Rewrite a project written for the reference OpenEnv (openenv.core) to run on openenv-runtime.",
        (
            "openenv migrate path/to/my_env --dry-run",
            "openenv migrate path/to/my_env",
        ),
    ),
    "bench": Verb(
        "openenv_cli.commands.bench",
        "Measure a server: concurrent sessions (the scaling-study workload) or steps per second.",
        (
            "openenv bench --serve --workers 2",
            "openenv bench --url http://127.0.0.1:8000 --mode throughput --sessions 16",
            """openenv bench --url http://127.0.0.1:8000 --action '{"message": "hi"}'""",
        ),
    ),
    "capture": Verb(
        "openenv_cli.commands.capture",
        "Proxy a model server and record each session's token ids and log-probabilities.",
        (
            "openenv capture --upstream http://127.0.0.1:8000/v1",
            "openenv capture --upstream http://gpu-box:8000/v1 --port 8300",
            "openenv capture --upstream http://127.0.0.1:8000/v1 --host 0.0.0.0 --admin-token T",
        ),
    ),
    "collect": Verb(
        "openenv_cli.commands.collect",
        "Run episodes (a model, a callable or random actions) and write them as a dataset.",
        (
            "openenv collect http://127.0.0.1:8000 --llm http://127.0.0.1:9000 --model m -n 1000 -c 32",
            "openenv collect . --policy random -n 50 --out smoke",
            "openenv collect http://127.0.0.1:8000 --llm URL --model m --tokens --resume -o runs/a",
        ),
    ),
    "eval": Verb(
        "openenv_cli.commands.eval",
        "Evaluate a model on an environment: mean reward with its interval, success, pass@k.",
        (
            "openenv eval http://127.0.0.1:8000 --llm http://127.0.0.1:9000 --model m -n 200 --k 1,4,8",
            "openenv eval --from runs/a",
            "openenv eval --compare runs/a/report.json runs/b/report.json",
        ),
    ),
    "deploy": Verb(
        "openenv_cli.commands.deploy",
        "Run the project on several machines behind Envoy: Kubernetes, Docker Swarm, Slurm.",
        (
            "openenv deploy kubernetes --replicas 4 --image registry.example.com/my_env:0.1.0",
            "openenv deploy swarm --replicas 2 --apply --json",
            "openenv deploy envoy --backend 10.0.0.5:8000 --backend 10.0.0.6:8000 --port 8080",
        ),
    ),
    "top": Verb(
        "openenv_cli.commands.top",
        "Watch every replica of a fleet: sessions, steps/s, step latency, refusals, stuck calls.",
        (
            "openenv top http://10.0.0.5:8000 http://10.0.0.6:8000",
            "openenv top --deploy deploy/slurm --interval 5",
            "openenv top 127.0.0.1:8000 --once --json",
        ),
    ),
}


def _epilog(examples: tuple[str, ...]) -> str:
    # Rich markup: a blank line keeps each example on its own line.
    lines = "\n\n".join(f"[cyan]$ {typer_escape(line)}[/]" for line in examples)
    return f"[bold]Examples[/]\n\n{lines}"


def typer_escape(text: str) -> str:
    """Escape rich markup in ``text`` without importing rich at start-up."""
    return text.replace("[", r"\[")


def _tidy_types(params: list[Any], *, plain_values: bool = True) -> list[Any]:
    """Flags need no type label in the help; a repeatable option shows ``<str>…`` instead of
    ``<list[str]>``; plain values skip pydantic (:mod:`openenv_cli._plain_values`)."""
    if plain_values:
        from openenv_cli._plain_values import speed_up

        for param in params:
            speed_up(param)
    for param in params:
        if param.name == "help" and param.default is None:
            # An unset --help is None, which Typer coerces through pydantic (50 ms of imports);
            # False is already a bool and skips that.
            param.default = False
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
        elif getattr(param, "multiple", False) and param.metavar is None:
            param.metavar = "<str>…"
        elif getattr(param, "nargs", 1) == -1 and hasattr(param, "display_type"):
            # A variadic argument (``TARGET...``): its type is shown the same way.
            param.display_type = lambda ctx: "<str>…"
    return params


class _Command(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _tidy_types(super().get_params(ctx))


class _LazyGroup(TyperGroup):
    """A group that imports a verb's module only when that verb runs (or shows its help)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, verb in VERBS.items():  # placeholders: what `openenv --help` lists
            self.commands.setdefault(name, TyperCommand(name, help=verb.summary))

    def get_params(self, ctx: Any) -> list[Any]:
        # The root's options are flags, which Typer already takes without pydantic.
        return _tidy_types(super().get_params(ctx), plain_values=False)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] in VERBS:
            return args[0], self.load(args[0]), args[1:]
        return super().resolve_command(ctx, args)

    def load(self, name: str) -> TyperCommand:
        """The real command ``name``: its module imported, its examples appended to the help."""
        current = self.commands[name]
        if current.callback is not None:
            return current  # type: ignore[return-value]
        verb = VERBS[name]
        module = importlib.import_module(verb.module)
        single = typer.Typer(
            rich_markup_mode="rich",
            context_settings={"help_option_names": ["-h", "--help"]},
            add_completion=False,
        )
        single.command(name=name, cls=_Command, epilog=_epilog(verb.examples))(module.command)
        command = typer.main.get_command(single)
        command.name = name
        self.commands[name] = command
        return command  # type: ignore[return-value]


app = typer.Typer(
    name="openenv",
    cls=_LazyGroup,
    help=HELP,
    epilog=_epilog(
        (
            'openenv init my_env && cd my_env && pip install -e ".[test]" && pytest',
            "openenv validate && openenv serve",
            "python -m openenv_cli --help   # the same CLI, whatever owns the `openenv` script",
        )
    ),
    rich_markup_mode="rich",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    add_completion=False,
)


def versions() -> dict[str, str]:
    """The versions of the CLI, the runtime it uses, and Python."""
    from importlib import metadata

    from openenv_cli import __version__ as cli

    try:  # the installed distribution's metadata: importing the runtime would take 0.3 s
        runtime = metadata.version("openenv-runtime")
    except metadata.PackageNotFoundError:
        runtime = "not installed"
    return {"openenv-toolkit": cli, "openenv-runtime": runtime, "python": sys.version.split()[0]}


def _show_version(value: bool) -> None:
    if value:
        found = versions()
        typer.echo(
            f"openenv-toolkit {found['openenv-toolkit']}\n"
            f"openenv-runtime {found['openenv-runtime']}\n"
            f"Python {found['python']}"
        )
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            callback=_show_version,
            is_eager=True,
            help="Show the versions of the CLI and the runtime, and exit.",
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option("--debug", envvar="OPENENV_DEBUG", help="Show full tracebacks on errors."),
    ] = False,
) -> None:
    from openenv_cli.console import set_debug

    set_debug(debug)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the app, render :class:`OpenEnvError` once, set the exit code."""
    from openenv_cli.errors import OpenEnvError

    if argv is None and "--debug" in sys.argv[1:]:
        from openenv_cli.console import set_debug

        set_debug(True)  # so errors raised before the callback runs still get a traceback
    from openenv_cli import _light_help

    _light_help.install()  # help and usage errors render through typer.rich_utils: lightly
    try:
        app(args=argv, prog_name="openenv")
    except OpenEnvError as error:
        _report(error)
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        from openenv_cli.console import err_console

        err_console.print("[red]Interrupted.[/]")
        sys.exit(130)
    except ModuleNotFoundError as error:  # an optional package: name the extra that brings it
        from openenv_cli.extras import missing_package

        words = argv if argv is not None else sys.argv[1:]
        _report(missing_package(error, next((w for w in words if not w.startswith("-")), None)))
        sys.exit(1)
    except Exception as error:  # a bug: say so briefly, unless asked for the traceback
        _report(
            OpenEnvError(
                f"Unexpected {type(error).__name__}: {error}",
                hint="Run again with --debug (or OPENENV_DEBUG=1) for the traceback, and report it if it is a bug.",
            )
        )
        sys.exit(1)


def _report(error: Exception) -> None:
    from openenv_cli.console import debug_enabled, err_console
    from openenv_cli.errors import OpenEnvError, render_error

    if debug_enabled():
        err_console.print_exception()
    if isinstance(error, OpenEnvError):
        render_error(error, err_console)


if __name__ == "__main__":
    main()
