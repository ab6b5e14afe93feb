"""Read and write a project's files without leaving the project folder or following a link.

:func:`read_inside` opens the path one component at a time from the (resolved) project
folder with ``O_NOFOLLOW`` and reads only a regular file. :func:`write_inside` opens the parent folder one component at a time from the (resolved)
project folder with ``O_NOFOLLOW``, writes the new text to a fresh temporary file in that
folder (``O_CREAT | O_EXCL | O_NOFOLLOW``), then renames it over the target: the rename
replaces a name, it never writes through what the name points to. A target that is a
symbolic link or anything but a regular file is refused, so a planted link is reported
rather than replaced or followed. Reading goes through
:func:`openenv_cli.image.safe_files.read_inside`, which holds the same line.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path, PurePosixPath

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
NEW_FILE_MODE = 0o666  # narrowed by the umask, as any new file


class OutsideProjectError(OSError):
    """A path that is, or became, a link, something other than a regular file, or outside
    the project."""


def _parts(relative: str) -> tuple[str, ...]:
    parts = PurePosixPath(relative).parts
    if not parts or any(part in {"..", ".", "/"} for part in parts):
        raise OutsideProjectError(f"{relative!r} is not a plain path inside the project")
    return parts


def read_inside(root: Path, relative: str) -> bytes:
    """The bytes of the regular file ``root/relative``; no component may be a link.

    Raises :class:`OutsideProjectError` otherwise (a FIFO or device is refused, not read).
    """
    parts = _parts(relative)
    folder = _open_folder(root, parts[:-1])
    try:
        fd = os.open(parts[-1], os.O_RDONLY | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, dir_fd=folder)
    except OSError as exc:
        raise OutsideProjectError(f"{relative} is a symbolic link or unreadable") from exc
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as source:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OutsideProjectError(f"{relative} is not a regular file")
        os.set_blocking(fd, True)
        return source.read()


def _open_folder(root: Path, parts: tuple[str, ...]) -> int:
    folder = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    for part in parts:
        try:
            inner = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=folder)
        except OSError as exc:
            os.close(folder)
            raise OutsideProjectError(f"{part} is not a plain folder inside the project") from exc
        os.close(folder)
        folder = inner
    return folder


def write_inside(root: Path, relative: str, text: str) -> None:
    """Replace (or create) the regular file ``root/relative`` with ``text``, atomically.

    Raises :class:`OutsideProjectError` when a component of the path is a symbolic link or
    the target exists and is not a regular file. ``root`` must be resolved. The file keeps
    its permission bits; a new file gets ``NEW_FILE_MODE`` less the umask.
    """
    parts = _parts(relative)
    folder = _open_folder(root, parts[:-1])
    name = parts[-1]
    temporary = f".{name}.{secrets.token_hex(6)}.tmp"
    try:
        mode: int | None = None
        try:
            current = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            if not stat.S_ISREG(current.st_mode):
                raise OutsideProjectError(f"{relative} is a symbolic link or not a regular file")
            mode = stat.S_IMODE(current.st_mode)
        fd = os.open(
            temporary,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC,
            NEW_FILE_MODE if mode is None else 0o600,  # an existing file's mode is set below
            dir_fd=folder,
        )
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
                if mode is not None:  # the umask does not narrow what the file had
                    os.fchmod(out.fileno(), mode)
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            try:
                os.unlink(temporary, dir_fd=folder)
            except FileNotFoundError:
                pass
            raise
    finally:
        os.close(folder)
