"""Compiled templates are kept only in a private folder, and never change what is rendered."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv_cli.scaffold import render_project
from openenv_cli.template_cache import bytecode_cache, cache_folder, private_folder


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "openenv" / "templates"


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.jinja-cache")) if folder.is_dir() else []


def test_second_render_reads_the_cache_and_renders_the_same(cache_home: Path) -> None:
    first = render_project("my_env")
    entries = _entries(cache_home)
    assert entries, "the compiled templates were not kept"
    assert cache_home.stat().st_mode & 0o777 == 0o700
    assert render_project("my_env") == first
    assert render_project("other_env") != first


def test_an_edited_template_is_compiled_afresh(cache_home: Path, tmp_path: Path) -> None:
    root = tmp_path / "templates"
    (root / "one").mkdir(parents=True)
    template = root / "one" / "hello.txt.jinja"
    template.write_text("Hello {{ name }}\n")
    assert render_project("my_env", template="one", root=root) == {"hello.txt": "Hello my_env\n"}
    template.write_text("Bye {{ name }}\n")
    assert render_project("my_env", template="one", root=root) == {"hello.txt": "Bye my_env\n"}


def test_a_damaged_entry_is_compiled_again(cache_home: Path) -> None:
    expected = render_project("my_env")
    for entry in _entries(cache_home):
        entry.write_bytes(b"j2 not a pickle")
    assert render_project("my_env") == expected


def test_a_folder_others_can_write_to_is_not_used(cache_home: Path) -> None:
    """Entries hold code that is run: a folder anyone can write to must never be read."""
    cache_home.mkdir(parents=True)
    cache_home.chmod(0o777)
    assert not private_folder(cache_home)
    assert bytecode_cache() is None
    render_project("my_env")
    assert _entries(cache_home) == []


def test_a_link_is_not_used(cache_home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    cache_home.parent.mkdir(parents=True)
    cache_home.symlink_to(elsewhere, target_is_directory=True)
    assert bytecode_cache() is None
    render_project("my_env")
    assert _entries(elsewhere) == []


def test_a_folder_that_cannot_be_made_leaves_rendering_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert bytecode_cache() is None
    assert "pyproject.toml" in render_project("my_env")


def test_no_home_folder_leaves_rendering_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    def nowhere() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(Path, "home", nowhere)
    assert bytecode_cache() is None
    assert "pyproject.toml" in render_project("my_env")


def test_the_folder_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere/cache")
    assert cache_folder() == Path("/somewhere/cache/openenv/templates")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the spec: absolute paths only
    assert cache_folder() == Path.home() / ".cache" / "openenv" / "templates"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_folder() == Path.home() / ".cache" / "openenv" / "templates"
