"""Read and write files inside a folder without leaving it or following a link.

Every file the CLI writes into a folder the user named (a collection's shards, ``run.json``
and card, evaluation and benchmark reports, deploy renders, a build context, a migrated
project) goes through :func:`replacing` (or :func:`write_inside`, its one-shot form). The
folders on the way are opened one component at a time from ``root`` with ``O_NOFOLLOW``;
the new content goes into a temporary file created there with
``O_CREAT | O_EXCL | O_NOFOLLOW``, which is flushed and then renamed over the target. The
rename replaces a name, it never writes through what the name points to. A target or a
folder on the way that is a symbolic link (or not a regular file or folder) is refused with
:class:`UnsafePathError`, so a link planted in the folder is reported, never followed or
silently replaced. ``root`` itself is the user's choice and is opened as named.

:func:`read_inside` reads with the same rule.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from openenv_cli.errors import OpenEnvError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
NEW_FILE_MODE = 0o666  # narrowed by the umask, as any new file
NEW_FOLDER_MODE = 0o777  # the same


class UnsafePathError(OpenEnvError):
    """A path inside the folder that is a symbolic link, not a regular file or folder, or
    not a plain relative path: never read or written through."""

    def __init__(self, root: Path, relative: str, what: str) -> None:
        self.path = Path(root) / relative
        super().__init__(
            f"{self.path} {what}; openenv never reads or writes through a link.",
            hint=f"Remove {self.path} (it may point outside {root}), or choose another folder.",
        )


def _parts(root: Path, relative: str) -> tuple[str, ...]:
    parts = PurePosixPath(relative).parts
    if not parts or any(part in {"..", ".", "/"} for part in parts):
        raise UnsafePathError(root, relative, "is not a plain path inside the folder")
    return parts


def _open_folder(root: Path, parts: tuple[str, ...], *, create: bool) -> int:
    """A descriptor of ``root/parts``, entered without following a link (made when missing
    and ``create``; ``root`` itself, the user's choice, too)."""
    if create:
        Path(root).mkdir(parents=True, exist_ok=True)
    folder = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    for index, part in enumerate(parts):
        flags = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
        try:
            try:
                inner = os.open(part, flags, dir_fd=folder)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, NEW_FOLDER_MODE, dir_fd=folder)
                except FileExistsError:  # made meanwhile: opened (and checked) below
                    pass
                inner = os.open(part, flags, dir_fd=folder)
        except OSError as exc:
            os.close(folder)
            if isinstance(exc, FileNotFoundError):
                raise
            where = "/".join(parts[: index + 1])
            raise UnsafePathError(root, where, "is a symbolic link or not a folder") from exc
        os.close(folder)
        folder = inner
    return folder


def links_on_the_way(root: Path, relatives: Iterable[str]) -> list[Path]:
    """The symbolic links among the existing paths from ``root`` to each of ``relatives``
    (for a check before a many-file write; each write still refuses a link on its own)."""
    found: set[Path] = set()
    for relative in relatives:
        path = Path(root)
        for part in PurePosixPath(relative).parts:
            path = path / part
            if path.is_symlink():
                found.add(path)
                break
    return sorted(found)


def ensure_folder(root: Path, relative: str) -> None:
    """Make ``root/relative`` (and the folders on the way) unless there; refuses links."""
    os.close(_open_folder(root, _parts(root, relative), create=True))


def read_inside(root: Path, relative: str) -> bytes:
    """The bytes of the regular file ``root/relative``; no component may be a link.

    Raises :class:`UnsafePathError` otherwise (a FIFO or device is refused, not read), and
    ``FileNotFoundError`` when it is missing.
    """
    parts = _parts(root, relative)
    folder = _open_folder(root, parts[:-1], create=False)
    try:
        fd = os.open(parts[-1], os.O_RDONLY | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, dir_fd=folder)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UnsafePathError(root, relative, "is a symbolic link or unreadable") from exc
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as source:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePathError(root, relative, "is not a regular file")
        os.set_blocking(fd, True)
        return source.read()


@contextmanager
def replacing(root: Path, relative: str, *, sync: bool = True) -> Iterator[BinaryIO]:
    """A binary file to write the new content of ``root/relative`` into; when the block
    ends without an error it is flushed (to disk too with ``sync``; a throwaway build
    context skips that) and renamed over the target, atomically.

    ``root`` and the folders on the way are made when missing. Raises :class:`UnsafePathError` when one
    of them or the target is a symbolic link, or the target is not a regular file. An
    existing file keeps its permission bits; a new one gets ``NEW_FILE_MODE`` less the umask.
    On an error nothing is replaced and the temporary file is removed.
    """
    parts = _parts(root, relative)
    folder = _open_folder(root, parts[:-1], create=True)
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
                raise UnsafePathError(root, relative, "is a symbolic link or not a regular file")
            mode = stat.S_IMODE(current.st_mode)
        fd = os.open(
            temporary,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC,
            NEW_FILE_MODE if mode is None else 0o600,  # an existing file's mode is set below
            dir_fd=folder,
        )
        try:
            with os.fdopen(fd, "wb") as out:
                if mode is not None:  # the umask does not narrow what the file had
                    os.fchmod(out.fileno(), mode)
                yield out
                out.flush()
                if sync:
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


def write_inside(root: Path, relative: str, content: str | bytes, *, sync: bool = True) -> None:
    """Replace (or create) the regular file ``root/relative`` with ``content`` (text is
    written as UTF-8), through :func:`replacing`."""
    with replacing(root, relative, sync=sync) as out:
        out.write(content.encode("utf-8") if isinstance(content, str) else content)
