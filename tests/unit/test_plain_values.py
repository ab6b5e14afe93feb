"""Plain option values parse as Typer parses them, without importing pydantic."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer.core import TyperCommand
from typer.testing import CliRunner

from openenv_cli._plain_values import speed_up

REPO = Path(__file__).resolve().parents[2]


class _Fast(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)
        for param in params:
            speed_up(param)
        return params


def _app(cls: type[TyperCommand]) -> typer.Typer:
    app = typer.Typer(add_completion=False)

    @app.command(cls=cls)
    def show(
        name: Annotated[str, typer.Argument()],
        count: Annotated[int, typer.Option(min=1, max=10)] = 3,
        port: Annotated[int, typer.Option()] = 8000,
        folder: Annotated[Path, typer.Option(file_okay=False)] = Path("."),
        source: Annotated[Path | None, typer.Option(exists=True, dir_okay=False)] = None,
        note: Annotated[str | None, typer.Option()] = None,
        tag: Annotated[list[str] | None, typer.Option()] = None,
        ratio: Annotated[float, typer.Option()] = 0.5,
    ) -> None:
        values = [name, count, port, folder, source, note, tag, ratio]
        typer.echo(repr([(type(v).__name__, v) for v in values]))

    return app


@pytest.mark.parametrize(
    "args",
    [
        ["x"],
        ["x", "--count", "7", "--port", "-1", "--note", "hi", "--tag", "a", "--tag", "b"],
        ["x", "--count", "+4", "--port", "007", "--ratio", "2"],
        ["x", "--count", "0"],  # below the bound: Typer's own message
        ["x", "--count", "11"],
        ["x", "--count", "seven"],
        ["x", "--port", " 9 "],  # not plain digits: Typer decides
        ["x", "--port", "１２"],  # non-ASCII digits: Typer decides
        ["x", "--folder", "sub"],
        ["x", "--folder", "a-file"],  # file_okay=False: refused
        ["x", "--source", "a-file"],
        ["x", "--source", "missing"],  # exists=True: refused
        ["x", "--source", "sub"],  # dir_okay=False: refused
        ["x", "--folder", ""],
    ],
)
def test_same_values_and_errors_as_typer(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "a-file").write_text("x")
    runner = CliRunner()
    fast = runner.invoke(_app(_Fast), args)
    plain = runner.invoke(_app(TyperCommand), args)
    assert (fast.exit_code, fast.output) == (plain.exit_code, plain.output)


@pytest.mark.parametrize("where", [["--output-dir", "{tmp}"], []])
def test_init_imports_no_pydantic(where: list[str], tmp_path: Path) -> None:
    """With and without --output-dir (its default is a Path, not a string)."""
    args = ["init", "probe_env", *(arg.replace("{tmp}", str(tmp_path)) for arg in where)]
    code = (
        "import sys\n"
        "from openenv_cli.main import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit as stop:\n"
        "    assert not stop.code, stop.code\n"
        "print('PYDANTIC', 'pydantic' in sys.modules)\n"
    )
    checkout = os.pathsep.join(str(p) for p in (REPO, REPO / "runtime"))  # not an installed copy
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": checkout},
    )
    assert done.returncode == 0, done.stderr
    assert "PYDANTIC False" in done.stdout
    assert (tmp_path / "probe_env" / "pyproject.toml").is_file()
