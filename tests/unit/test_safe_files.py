"""openenv_cli.safe_files: writes that never follow a link, atomic, modes kept."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from openenv_cli import safe_files
from openenv_cli.errors import OpenEnvError
from openenv_cli.safe_files import (
    UnsafePathError,
    ensure_folder,
    links_on_the_way,
    read_inside,
    replacing,
    write_inside,
)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside.txt"
    path.write_text("precious\n")
    return path


def test_writes_text_and_bytes_and_makes_the_folders(tmp_path: Path) -> None:
    root = tmp_path / "new"
    write_inside(root, "a/b/c.txt", "héllo\n")
    write_inside(root, "d.bin", b"\x00\x01")
    assert (root / "a" / "b" / "c.txt").read_text(encoding="utf-8") == "héllo\n"
    assert (root / "d.bin").read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in root.rglob("*")) == ["a", "b", "c.txt", "d.bin"]  # no temp


def test_a_linked_target_is_refused_and_left_alone(tmp_path: Path, outside: Path) -> None:
    (tmp_path / "report.md").symlink_to(outside)
    with pytest.raises(UnsafePathError, match=r"report\.md is a symbolic link") as refused:
        write_inside(tmp_path, "report.md", "new")
    assert isinstance(refused.value, OpenEnvError) and refused.value.hint
    assert "Remove" in refused.value.hint
    assert outside.read_text() == "precious\n" and (tmp_path / "report.md").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside.txt", "report.md"]


def test_a_dangling_link_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / "run.json").symlink_to(tmp_path / "nowhere" / "x.json")
    with pytest.raises(UnsafePathError):
        write_inside(tmp_path, "run.json", "{}")
    assert not (tmp_path / "nowhere").exists()


def test_a_linked_folder_on_the_way_is_refused(tmp_path: Path) -> None:
    away = tmp_path / "away"
    away.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "data").symlink_to(away, target_is_directory=True)
    with pytest.raises(UnsafePathError, match="data is a symbolic link"):
        write_inside(root, "data/shard-00000.jsonl", "{}\n")
    with pytest.raises(UnsafePathError, match="data is a symbolic link"):
        ensure_folder(root, "data")
    with pytest.raises(UnsafePathError):
        read_inside(root, "data/x")
    assert list(away.iterdir()) == []


def test_a_planted_temp_name_is_not_used(tmp_path: Path, outside: Path) -> None:
    (tmp_path / "README.md.tmp").symlink_to(outside)
    write_inside(tmp_path, "README.md", "card\n")
    assert outside.read_text() == "precious\n"
    assert (tmp_path / "README.md").read_text() == "card\n"


def test_the_temporary_file_is_created_exclusively_without_following(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(safe_files.secrets, "token_hex", lambda n: "fixed")
    (tmp_path / ".x.fixed.tmp").symlink_to(outside)
    with pytest.raises(FileExistsError):
        write_inside(tmp_path, "x", "new")
    assert outside.read_text() == "precious\n"


def test_a_folder_or_fifo_at_the_target_is_refused(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "pipe")
    for name in ("folder", "pipe"):
        with pytest.raises(UnsafePathError, match="not a regular file"):
            write_inside(tmp_path, name, "x")
    with pytest.raises(UnsafePathError, match="not a regular file"):
        read_inside(tmp_path, "pipe")


@pytest.mark.parametrize("relative", ["../x", "a/../../x", "/etc/passwd", ".", ""])
def test_paths_that_leave_the_folder_are_refused(tmp_path: Path, relative: str) -> None:
    with pytest.raises(UnsafePathError, match="not a plain path"):
        write_inside(tmp_path / "root", relative, "x")


def test_an_error_while_writing_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path) -> None:
    write_inside(tmp_path, "a.txt", "old\n")
    with pytest.raises(RuntimeError), replacing(tmp_path, "a.txt") as out:
        out.write(b"half")
        raise RuntimeError("disk on fire")
    assert (tmp_path / "a.txt").read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_an_existing_file_keeps_its_mode_and_a_new_one_follows_the_umask(tmp_path: Path) -> None:
    (tmp_path / "kept").write_text("x")
    (tmp_path / "kept").chmod(0o640)
    write_inside(tmp_path, "kept", "y")
    assert stat.S_IMODE((tmp_path / "kept").stat().st_mode) == 0o640
    old = os.umask(0o027)
    try:
        write_inside(tmp_path, "new", "z")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o640


def test_a_hard_link_is_replaced_not_written_through(tmp_path: Path, outside: Path) -> None:
    os.link(outside, tmp_path / "linked")
    write_inside(tmp_path, "linked", "new\n")
    assert outside.read_text() == "precious\n"
    assert (tmp_path / "linked").read_text() == "new\n"


def test_links_on_the_way_names_the_first_link_of_each_path(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "file").symlink_to(tmp_path)
    (tmp_path / "dir").symlink_to(tmp_path, target_is_directory=True)
    found = links_on_the_way(tmp_path, ["real/file", "dir/x/y", "real/ok", "missing/z"])
    assert found == [tmp_path / "dir", tmp_path / "real" / "file"]


def test_read_inside_reads_regular_files_and_says_when_missing(tmp_path: Path) -> None:
    write_inside(tmp_path, "a/b.txt", "hi")
    assert read_inside(tmp_path, "a/b.txt") == b"hi"
    with pytest.raises(FileNotFoundError):
        read_inside(tmp_path, "a/none.txt")
