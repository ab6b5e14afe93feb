"""Compiled templates kept between runs, so ``openenv init`` skips Jinja's compiler.

Compiling the project's templates takes longer than rendering and writing them; Jinja can
keep the compiled code in files (its bytecode cache), checked against each template's source
so an edited template is compiled afresh. The files hold code that is run, so they live only
in a folder of the user's own: ``$XDG_CACHE_HOME/openenv/templates`` (``~/.cache/...`` by
default), created ``0700``, and used only while it is a real folder (not a link) owned by the
user that no one else can write to. Anything else, or any error reading or writing it, and
templates are compiled as before: the cache only ever saves time.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from jinja2.bccache import Bucket, FileSystemBytecodeCache

FOLDER = ("openenv", "templates")


def cache_folder() -> Path:
    """Where compiled templates go: under ``$XDG_CACHE_HOME``, else ``~/.cache``."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root.joinpath(*FOLDER)


def private_folder(path: Path) -> bool:
    """True when ``path`` is a folder (not a link) of this user's that only they can write."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:
        return False  # no owner to check against (Windows): go without
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == getuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


class _QuietCache(FileSystemBytecodeCache):
    """Jinja's file cache, with a failure to read or write an entry treated as a miss."""

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:  # unreadable or damaged entry: compile instead
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:  # full or read-only disk: the next run compiles again
            pass


def bytecode_cache() -> FileSystemBytecodeCache | None:
    """The cache in :func:`cache_folder`, or ``None`` when that folder cannot be trusted."""
    try:
        folder = cache_folder()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (OSError, RuntimeError):  # no home folder to be found, or no way to make it
        return None
    if not private_folder(folder):
        return None
    return _QuietCache(str(folder), "%s.jinja-cache")
