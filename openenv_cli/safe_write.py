"""Write a project's files without ever leaving the project folder or following a link.

:func:`write_inside` opens the parent folder one component at a time from the (resolved)
project folder with ``O_NOFOLLOW``, writes the new text to a fresh temporary file in that
folder (``O_CREAT | O_EXCL | O_NOFOLLOW``), then renames it over the target: the rename
replaces a name, it never writes through what the name points to. A target that is a
symbolic link or anything but a regular file is refused, so a planted link is reported
rather than replaced or followed. Reading goes through
:func:`openenv_cli.build.safe_files.read_inside`, which holds the same line.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path, PurePosixPath

from openenv_cli.build.safe_files import OutsideProjectError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
NEW_FILE_MODE = 0o644


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
    its permission bits; a new file gets ``NEW_FILE_MODE``.
    """
    parts = PurePosixPath(relative).parts
    if not parts or any(part in {"..", ".", "/"} for part in parts):
        raise OutsideProjectError(f"{relative!r} is not a plain path inside the project")
    folder = _open_folder(root, parts[:-1])
    name = parts[-1]
    temporary = f".{name}.{secrets.token_hex(6)}.tmp"
    try:
        mode = NEW_FILE_MODE
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
            mode,
            dir_fd=folder,
        )
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
                os.fchmod(out.fileno(), mode)  # the umask does not narrow what the file had
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
