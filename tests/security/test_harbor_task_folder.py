"""A Harbor task folder is user input: no symbolic link leads a read, a build context or the
tests sent into a container outside the folder, and odd files cannot hang a read."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from openenv_runtime.adapters.harbor_local import run_local
from openenv_runtime.adapters.harbor_task import folder_archive, read_task
from openenv_runtime.errors import AdapterError
from tests.support.harbor_task import make_task

SECRET = "the host's secret\n"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir()
    path.write_text(SECRET)
    return path


@pytest.mark.parametrize("name", ["instruction.md", "task.toml"])
def test_a_linked_file_is_refused_not_read(tmp_path: Path, secret: Path, name: str) -> None:
    root = make_task(tmp_path / "t")
    (root / name).unlink()
    (root / name).symlink_to(secret)
    with pytest.raises(AdapterError, match="symbolic link"):
        read_task(str(root))


def test_a_linked_folder_on_the_way_is_refused(tmp_path: Path, secret: Path) -> None:
    root = make_task(tmp_path / "t")
    (root / "tests" / "test.sh").unlink()
    (root / "tests").rmdir()
    (root / "tests").symlink_to(secret.parent)
    with pytest.raises(AdapterError, match="symbolic link"):
        read_task(str(root))


def test_links_go_into_archives_as_links_never_as_what_they_point_at(
    tmp_path: Path, secret: Path
) -> None:
    root = make_task(tmp_path / "t")
    (root / "environment" / "leak.txt").symlink_to(secret)
    (root / "environment" / "up").symlink_to(secret.parent)
    data = folder_archive(root, "environment")
    assert SECRET.encode() not in data
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        leak = tar.getmember("leak.txt")
        assert leak.issym() and leak.linkname == str(secret)
        assert tar.getmember("up").issym()
        assert "up/secret.txt" not in tar.getnames()


def test_a_fifo_is_refused_rather_than_read(tmp_path: Path) -> None:
    root = make_task(tmp_path / "t")
    os.mkfifo(root / "tests" / "pipe")
    with pytest.raises(AdapterError, match="not a file, folder or link"):
        folder_archive(root, "tests")
    (root / "instruction.md").unlink()
    os.mkfifo(root / "instruction.md")
    with pytest.raises(AdapterError, match="not a regular file"):
        read_task(str(root))


def test_the_archived_folder_itself_may_not_be_a_link(tmp_path: Path, secret: Path) -> None:
    root = make_task(tmp_path / "t")
    (root / "environment" / "Dockerfile").unlink()
    (root / "environment").rmdir()
    (root / "environment").symlink_to(secret.parent)
    with pytest.raises(AdapterError, match="not a plain folder"):
        folder_archive(root, "environment")


@pytest.mark.parametrize("where", ["environment/leak.txt", "tests/up", "notes.md"])
def test_import_copies_no_link_and_nothing_it_points_at(
    tmp_path: Path, secret: Path, where: str
) -> None:
    """`openenv import harbor:` copies the task folder into the project: a link anywhere in it
    is refused (named), and nothing outside the folder is read or written."""
    from openenv_cli.commands.import_ import import_project
    from openenv_cli.errors import UsageError

    root = make_task(tmp_path / "t")
    link = root / where
    link.symlink_to(secret.parent if where.endswith("up") else secret)
    with pytest.raises(UsageError, match="is a symbolic link") as refused:
        import_project(f"harbor:{root}")
    assert str(link) in str(refused.value)


def test_import_reads_no_fifo_in_the_task_folder(tmp_path: Path) -> None:
    from openenv_cli.commands.import_ import import_project
    from openenv_cli.errors import UsageError

    root = make_task(tmp_path / "t")
    os.mkfifo(root / "environment" / "pipe")
    with pytest.raises(UsageError, match="not a regular file"):
        import_project(f"harbor:{root}")


def test_a_command_does_not_see_the_server_s_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENENV_API_KEY", "server-key")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    monkeypatch.setenv("TASK_SETTING", "kept")
    ran = run_local(["env"], limit=65536, seconds=10, cwd=str(tmp_path))
    seen = ran.stdout.decode()
    assert "TASK_SETTING=kept" in seen
    assert "server-key" not in seen and "hf_secret" not in seen
