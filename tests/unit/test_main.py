"""The wiring of `openenv`: lazy verbs, help without type labels and with examples."""

from __future__ import annotations

import importlib
import inspect
import shlex
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from openenv_cli.main import VERBS, app

runner = CliRunner()


def _help(*args: str) -> str:
    result = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_importing_the_cli_imports_no_command_module() -> None:
    code = (
        "import sys, openenv_cli.main\n"
        "heavy = [m for m in sys.modules if m.startswith(('openenv_cli.commands.', "
        "'openenv_cli.manifest', 'openenv_cli.docker_build', 'docker', 'huggingface_hub', "
        "'jinja2', 'openenv_runtime'))]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_root_help_lists_every_verb_with_its_summary() -> None:
    out = _help()
    for name, verb in VERBS.items():
        assert name in out and verb.summary.split(":")[0] in out


@pytest.mark.parametrize("name", list(VERBS))
def test_summary_is_the_first_line_of_the_command_docstring(name: str) -> None:
    module = importlib.import_module(VERBS[name].module)
    first = inspect.getdoc(module.command).splitlines()[0]
    plain = first.replace("[bold]", "").replace("[/]", "")
    assert VERBS[name].summary == plain


@pytest.mark.parametrize("args", [(), *((name,) for name in VERBS)])
def test_flags_have_no_type_label(args: tuple[str, ...]) -> None:
    out = _help(*args)
    assert "<bool>" not in out and "<list[" not in out


@pytest.mark.parametrize("name", list(VERBS))
def test_every_help_ends_with_its_examples(name: str) -> None:
    out = _help(name)
    tail = out[out.index("Examples") :]
    assert 2 <= len(VERBS[name].examples) <= 3
    for example in VERBS[name].examples:
        assert f"$ {example.split('  #')[0].strip()}" in " ".join(tail.split())


def test_python_m_openenv_cli() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "openenv_cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.startswith("openenv-toolkit ")


def test_unknown_verb_suggests_the_nearest() -> None:
    result = runner.invoke(app, ["inti"])
    assert result.exit_code == 2 and "init" in result.output


@pytest.mark.parametrize(
    "example", [e for verb in VERBS.values() for e in verb.examples], ids=lambda e: e
)
def test_examples_use_options_that_exist(example: str) -> None:
    """Each example parses (an unknown or renamed option fails); --help stops before running."""
    args = shlex.split(example.split("  #")[0])
    assert args[0] == "openenv"
    result = runner.invoke(app, [*args[1:], "--help"])
    assert result.exit_code == 0, result.output


def test_bracketed_help_text_survives_rich_markup() -> None:
    assert "openenv-toolkit[bench]" in _help("bench").replace("\n", "")
    assert "[default: the project name]" in " ".join(_help("deploy").split())


def test_help_leaves_out_markdown_and_traceback_rendering() -> None:
    """`openenv --help` loads typer's renderer without rich.markdown / rich.traceback, which
    still work (as the real classes) when something uses them later."""
    code = (
        "import sys\n"
        "from openenv_cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = sorted(m for m in ('rich.markdown', 'rich.traceback', 'markdown_it') if m in sys.modules)\n"
        "import typer.rich_utils as r\n"
        "md = r.Markdown('*x*')\n"
        "import rich.markdown\n"
        "assert isinstance(md, rich.markdown.Markdown), type(md)\n"
        "try:\n"
        "    raise ValueError('boom')\n"
        "except ValueError as e:\n"
        "    tb = r.Traceback.from_exception(type(e), e, e.__traceback__)\n"
        "print('LOADED', loaded, type(tb).__module__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "Usage: openenv" in done.stdout
    assert "LOADED [] rich.traceback" in done.stdout
