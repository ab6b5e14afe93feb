"""Read a project's files without ever leaving the project folder.

Every read of a project file for a build context or an upload goes through
:func:`open_inside`: the path is resolved, checked to lie inside the project, and then opened
one component at a time relative to the project folder with ``O_NOFOLLOW``. A symbolic link
swapped in after the check (between listing and reading) makes the open fail instead of being
followed, so no byte from outside the project can reach a context, whatever happens on disk
meanwhile.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path, PurePosixPath

from openenv_cli.safe_files import replacing

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_COPY_CHUNK = 1 << 20


class OutsideProjectError(OSError):
    """A path that is, or became, something other than a regular file inside the project."""


def target_inside(root: Path, relative: str) -> str | None:
    """Where ``relative`` (which may be a symbolic link) really points, relative to ``root``
    (POSIX), or None when it resolves outside ``root`` or nowhere."""
    try:
        resolved = (root / relative).resolve(strict=True)
    except (OSError, RuntimeError):  # missing target, or a loop of links
        return None
    if not resolved.is_relative_to(root):
        return None
    return resolved.relative_to(root).as_posix()


def open_inside(root: Path, relative: str) -> int:
    """A read-only descriptor of the regular file ``root/relative``.

    Raises :class:`OutsideProjectError` when any component of the path is a symbolic link or
    the file is not regular (FIFOs, devices and sockets would hang a read or leak state).
    ``root`` itself must be resolved (``Path.resolve()``): it is the trust anchor.
    """
    parts = PurePosixPath(relative).parts
    if not parts or any(part in {"..", ".", "/"} for part in parts):
        raise OutsideProjectError(f"{relative!r} is not a plain path inside the project")
    folder = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(
                    part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=folder
                )
            except OSError as exc:
                raise OutsideProjectError(f"{relative}: {part} is not a plain folder") from exc
            os.close(folder)
            folder = inner
        try:
            fd = os.open(
                parts[-1], os.O_RDONLY | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, dir_fd=folder
            )
        except OSError as exc:
            raise OutsideProjectError(f"{relative} is a symbolic link or unreadable") from exc
    finally:
        os.close(folder)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OutsideProjectError(f"{relative} is not a regular file")
    os.set_blocking(fd, True)
    return fd


def read_inside(root: Path, relative: str) -> bytes:
    """The bytes of ``root/relative``, read through :func:`open_inside`."""
    with os.fdopen(open_inside(root, relative), "rb") as source:
        return source.read()


def copy_inside(root: Path, relative: str, into: Path, target: str) -> None:
    """Copy ``root/relative`` (read through :func:`open_inside`) to ``into/target`` (written
    through :func:`openenv_cli.safe_files.replacing`, never through a link in ``into``)."""
    with (
        os.fdopen(open_inside(root, relative), "rb") as source,
        replacing(into, target, sync=False) as out,
    ):
        shutil.copyfileobj(source, out, _COPY_CHUNK)
