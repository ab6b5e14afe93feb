"""openenv_cli.image.selection: the ignore-file rules of what ships (secrets and links: test_context_secrets.py)."""

from __future__ import annotations

from pathlib import Path

from openenv_cli.image.selection import RUNTIME_DIR, select_files

# -- project_files --------------------------------------------------------------------------


def _touch(root: Path, *paths: str) -> None:
    for relative in paths:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"content of {relative}\n")


def _names(root: Path, extra: tuple[str, ...] = ()) -> set[str]:
    return set(select_files(root, extra).paths)


def test_never_shipped(tmp_path: Path) -> None:
    _touch(
        tmp_path,
        "keep.py",
        "server/app.py",
        "server/build/kept.py",
        ".git/HEAD",
        ".env",
        ".env.production",
        ".venv/bin/python",
        "venv/lib/x.py",
        "myenv/pyvenv.cfg",
        "myenv/lib/site.py",
        "server/__pycache__/app.cpython-311.pyc",
        "stray.pyc",
        ".pytest_cache/v",
        ".mypy_cache/x",
        ".ruff_cache/x",
        "ui/node_modules/a/index.js",
        "my_env.egg-info/PKG-INFO",
        "build/lib/x.py",
        "dist/x.whl",
        "uv.lock",
        "poetry.lock",
        "Pipfile.lock",
        "pdm.lock",
        f"{RUNTIME_DIR}/stale.txt",
    )
    assert _names(tmp_path) == {"keep.py", "server/app.py", "server/build/kept.py"}


def test_gitignore_with_negation_and_nested_files(tmp_path: Path) -> None:
    _touch(
        tmp_path,
        "a.log",
        "keep.log",
        "data/x.csv",
        "data/y.csv",
        "sub/local.txt",
        "sub/other.txt",
        "other/local.txt",
    )
    (tmp_path / ".gitignore").write_text("*.log\n!keep.log\ndata/x.csv\n")
    (tmp_path / "sub" / ".gitignore").write_text("local.txt\n")
    assert _names(tmp_path) == {
        ".gitignore",
        "keep.log",
        "data/y.csv",
        "sub/.gitignore",
        "sub/other.txt",
        "other/local.txt",
    }


def test_nested_gitignore_can_re_include(tmp_path: Path) -> None:
    _touch(tmp_path, "sub/a.txt", "sub/b.txt")
    (tmp_path / ".gitignore").write_text("*.txt\n")
    (tmp_path / "sub" / ".gitignore").write_text("!a.txt\n")
    assert _names(tmp_path) == {".gitignore", "sub/.gitignore", "sub/a.txt"}


def test_dockerignore_is_anchored_at_the_root(tmp_path: Path) -> None:
    _touch(
        tmp_path,
        "tests/test_x.py",
        "server/tests/helper.py",
        "docs/a.md",
        "notes.md",
        "server/notes.md",
        "x/cache.pyc",
    )
    (tmp_path / ".dockerignore").write_text("# comment\ntests\n/docs/\n*.md\n!notes.md\n**/*.pyc\n")
    assert _names(tmp_path) == {
        ".dockerignore",
        "server/tests/helper.py",
        "notes.md",
        "server/notes.md",
    }


def test_extra_excludes(tmp_path: Path) -> None:
    _touch(tmp_path, "data/big.bin", "data/small.txt", "a.bin", "deep/x/a.bin", "keep.py")
    assert _names(tmp_path, ("data/", "*.bin")) == {"keep.py"}
    assert _names(tmp_path, ("/a.bin",)) == {
        "data/big.bin",
        "data/small.txt",
        "deep/x/a.bin",
        "keep.py",
    }


def test_always_excluded_cannot_be_reincluded(tmp_path: Path) -> None:
    _touch(tmp_path, ".env", "uv.lock", "x.py")
    (tmp_path / ".gitignore").write_text("!.env\n!uv.lock\n")
    assert _names(tmp_path) == {".gitignore", "x.py"}
