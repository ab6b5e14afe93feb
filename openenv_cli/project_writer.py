"""Write a rendered project to disk, all or nothing (the last step of ``openenv init``).

``write_project`` is the only function that touches the destination, and it is atomic: the
files are written into a temporary folder beside the target, which is then renamed into
place, so a failure half-way leaves nothing behind.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.safe_files import links_on_the_way, write_inside


def _check_destination(dest: Path, force: bool) -> None:
    if dest.exists() and not dest.is_dir():
        raise UsageError(
            f"{dest} exists and is not a folder.", hint="Choose another name or --output-dir."
        )
    if dest.is_dir() and any(dest.iterdir()) and not force:
        raise UsageError(
            f"{dest} already exists and is not empty.",
            hint="Choose another name or --output-dir, or pass --force to overwrite the generated files in it.",
        )
    for parent in dest.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"{parent} is not a folder.", hint="Choose another --output-dir.")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise UsageError(
                    f"Cannot write to {parent}: permission denied.",
                    hint="Choose a writable --output-dir.",
                )
            break


def _unwritable(exc: OSError, where: Path) -> OpenEnvError:
    if exc.errno in {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR}:
        return UsageError(
            f"Cannot write to {where}: {exc.strerror or exc}.",
            hint="Choose a writable --output-dir.",
        )
    return OpenEnvError(
        f"Writing the project to {where} failed: {exc}. Nothing was written.",
        hint="Fix the cause above and run the command again.",
    )


def write_project(
    files: Mapping[str, str | bytes], dest: str | Path, force: bool = False
) -> list[Path]:
    """Write rendered ``files`` under ``dest``, all or nothing; return the paths written.

    ``dest`` must not exist, or be empty, or ``force`` must be set (then generated files
    replace existing ones of the same name and other files are kept).
    """
    dest = Path(dest).absolute()
    _check_destination(dest, force)
    linked = links_on_the_way(dest, files) if dest.is_dir() else []
    if linked:
        raise UsageError(
            f"Symbolic links are where files would be written: {', '.join(map(str, linked))}. "
            "openenv never writes through a link (it could point outside the folder).",
            hint="Remove the links, or choose another folder.",
        )
    created: list[Path] = []  # parents we made, removed again on failure
    staging: Path | None = None
    try:
        missing = [p for p in reversed(dest.parents) if not p.exists()]
        for parent in missing:
            parent.mkdir()
            created.append(parent)
        staging = Path(
            tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
        )
        umask = os.umask(0)
        os.umask(umask)
        for relative, text in files.items():
            write_inside(staging, relative, text, sync=False)
        for folder in [staging, *(p for p in staging.rglob("*") if p.is_dir())]:
            folder.chmod(0o777 & ~umask)
        if dest.is_dir() and any(dest.iterdir()):
            _merge(staging, dest, files)
        else:
            if dest.is_dir():
                dest.rmdir()
            os.rename(staging, dest)
            staging = None
    except OSError as exc:
        for parent in reversed(created):
            shutil.rmtree(parent, ignore_errors=True)
        raise _unwritable(exc, dest) from exc
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return [dest / relative for relative in files]


def _merge(staging: Path, dest: Path, files: Mapping[str, str | bytes]) -> None:
    """Move staged files over an existing project; on any failure put everything back."""
    backup = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".backup", dir=dest.parent))
    moved: list[tuple[Path, Path | None]] = []  # (placed file, its backup)
    made_dirs: list[Path] = []
    try:
        for relative in files:
            source, target = staging / relative, dest / relative
            for parent in reversed(target.relative_to(dest).parents):
                folder = dest / parent
                if not folder.exists():
                    folder.mkdir()
                    made_dirs.append(folder)
            saved = None
            if target.exists() or target.is_symlink():
                if target.is_dir() and not target.is_symlink():
                    raise IsADirectoryError(errno.EISDIR, "a folder is in the way", str(target))
                saved = backup / relative
                saved.parent.mkdir(parents=True, exist_ok=True)
                os.replace(target, saved)
            moved.append((target, saved))
            os.replace(source, target)
    except OSError:
        for target, saved in reversed(moved):
            if saved is not None:
                os.replace(saved, target)
            elif target.exists():
                target.unlink()
        for folder in reversed(made_dirs):
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(backup, ignore_errors=True)
