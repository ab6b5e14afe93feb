"""Writing a rendered project: all or nothing, --force merges, clear errors."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from openenv_cli import project_writer
from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.project_writer import write_project
from openenv_cli.scaffold import render_project


def test_write_creates_everything(tmp_path: Path) -> None:
    files = render_project("my_env")
    written = write_project(files, tmp_path / "my_env")
    assert {p.relative_to(tmp_path / "my_env").as_posix() for p in written} == set(files)
    assert (tmp_path / "my_env" / "server" / "app.py").read_text() == files["server/app.py"]
    assert [p.name for p in tmp_path.iterdir()] == ["my_env"]  # no temp folder left
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "my_env").stat().st_mode & 0o777 == 0o777 & ~umask  # not mkdtemp's 0700


def test_write_creates_missing_parents(tmp_path: Path) -> None:
    write_project({"a.txt": "a\n"}, tmp_path / "x" / "y" / "proj")
    assert (tmp_path / "x" / "y" / "proj" / "a.txt").is_file()


def test_write_into_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    write_project({"a.txt": "a\n"}, tmp_path / "proj")
    assert (tmp_path / "proj" / "a.txt").read_text() == "a\n"


def test_non_empty_folder_needs_force(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "keep.txt").write_text("mine")
    with pytest.raises(UsageError) as exc:
        write_project({"a.txt": "a\n"}, tmp_path / "proj")
    assert "--force" in exc.value.hint
    assert sorted(p.name for p in (tmp_path / "proj").iterdir()) == ["keep.txt"]


def test_force_overwrites_generated_files_and_keeps_others(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    (project / "keep.txt").write_text("mine")
    (project / "sub" / "a.txt").write_text("old")
    write_project({"sub/a.txt": "new\n", "b/c.txt": "c\n"}, project, force=True)
    assert (project / "keep.txt").read_text() == "mine"
    assert (project / "sub" / "a.txt").read_text() == "new\n"
    assert (project / "b" / "c.txt").read_text() == "c\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]


def test_failure_half_way_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = project_writer.write_inside
    calls = {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(project_writer, "write_inside", flaky)
    with pytest.raises(OpenEnvError) as exc:
        write_project(render_project("my_env"), tmp_path / "deep" / "my_env")
    assert exc.value.exit_code == 1 and "Nothing was written" in exc.value.message
    assert list(tmp_path.iterdir()) == []


def test_failure_during_forced_merge_restores_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "a.txt").write_text("old a")
    (project / "b.txt").write_text("old b")
    real_replace = os.replace
    calls = {"n": 0}

    def flaky(src, dst):
        calls["n"] += 1
        if calls["n"] == 4:  # a's backup, a placed, b's backup, then b fails
            raise OSError(errno.EIO, "I/O error")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(OpenEnvError):
        write_project({"a.txt": "new a", "b.txt": "new b", "c/d.txt": "d"}, project, force=True)
    monkeypatch.setattr(os, "replace", real_replace)
    assert (project / "a.txt").read_text() == "old a"
    assert (project / "b.txt").read_text() == "old b"
    assert sorted(p.name for p in project.iterdir()) == ["a.txt", "b.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]


def test_destination_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "proj").write_text("x")
    with pytest.raises(UsageError):
        write_project({"a.txt": "a"}, tmp_path / "proj")


def test_parent_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError) as exc:
        write_project({"a.txt": "a"}, tmp_path / "file" / "proj")
    assert "not a folder" in exc.value.message


def test_unwritable_parent_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "access", lambda *a, **k: False)
    with pytest.raises(UsageError) as exc:
        write_project({"a.txt": "a"}, tmp_path / "proj")
    assert "permission denied" in exc.value.message
    assert list(tmp_path.iterdir()) == []


def test_permission_error_while_writing_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", denied)
    with pytest.raises(UsageError):
        write_project({"a.txt": "a"}, tmp_path / "new" / "proj")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() == 0, reason="root ignores folder permissions"
)
def test_really_unwritable_folder(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        with pytest.raises(UsageError):
            write_project({"a.txt": "a"}, locked / "proj")
    finally:
        locked.chmod(0o755)
