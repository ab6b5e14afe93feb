"""A Harbor task folder, read as user input: bounded reads, no symbolic link followed.

The folder (Harbor's task format)::

    task.toml            timeouts, resources, the verifier's environment variables
    instruction.md       what the agent is asked to do
    environment/         the build context; environment/Dockerfile builds the task's image
    tests/test.sh        the verifier, run in the container once the agent submits

Every file is opened one path component at a time from the folder with ``O_NOFOLLOW``, so a
symbolic link anywhere on the way (or swapped in later) fails the read instead of reaching
outside the folder. Symbolic links inside ``environment/`` and ``tests/`` go into their
archives as links (the engine never follows them on the host). Sizes are bounded.
"""

from __future__ import annotations

import io
import os
import re
import stat
import sys
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import AdapterError

if sys.version_info >= (3, 11):
    import tomllib
else:  # the harbor extra brings tomli on Python 3.10
    import tomli as tomllib

TASK_FILE = "task.toml"
INSTRUCTION_FILE = "instruction.md"
ENVIRONMENT_FOLDER = "environment"
DOCKERFILE = "environment/Dockerfile"
TESTS_FOLDER = "tests"
TEST_SCRIPT = "tests/test.sh"
# Harbor's defaults for the timeouts task.toml leaves out (seconds).
DEFAULT_TIMEOUT = 600.0
MAX_TEXT_BYTES = 1 << 20  # task.toml, instruction.md
MAX_ARCHIVE_BYTES = 1 << 30  # the build context, and the tests uploaded to the container
MAX_ARCHIVE_FILES = 100_000

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class HarborTask:
    """What the adapter needs of a task folder (``root`` is resolved)."""

    root: Path
    name: str
    instruction: str
    agent_timeout: float = DEFAULT_TIMEOUT
    verifier_timeout: float = DEFAULT_TIMEOUT
    build_timeout: float = DEFAULT_TIMEOUT
    verifier_env: dict[str, str] = field(default_factory=dict)
    docker_image: str | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    allow_internet: bool = True


def read_task(path: str) -> HarborTask:
    """The task folder at ``path`` (absolute), checked; :class:`AdapterError` says what is wrong."""
    given = Path(path)
    if not given.is_absolute():
        raise AdapterError(
            f"harbor:{path} is not an absolute path: give the task folder's full path, "
            f"e.g. harbor:{Path.cwd() / path}."
        )
    root = given.resolve()
    if not root.is_dir():
        raise AdapterError(f"{path} is not a folder: give the path of a Harbor task folder.")
    config = _parse_toml(read_text(root, TASK_FILE))
    instruction = read_text(root, INSTRUCTION_FILE)
    if not instruction.strip():
        raise AdapterError(f"{root / INSTRUCTION_FILE} is empty: write what the agent must do.")
    environment = _table(config, "environment")
    image = environment.get("docker_image")
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise AdapterError(f"{root / TASK_FILE}: [environment] docker_image must be a name.")
    if image is None:
        _require_file(root, DOCKERFILE, "the task's image is built from it")
    _require_file(root, TEST_SCRIPT, "it is run when the agent submits, and writes the reward")
    verifier = _table(config, "verifier")
    return HarborTask(
        root=root,
        name=root.name,
        instruction=instruction,
        agent_timeout=_seconds(_table(config, "agent"), "timeout_sec"),
        verifier_timeout=_seconds(verifier, "timeout_sec"),
        build_timeout=_seconds(environment, "build_timeout_sec"),
        verifier_env=_env(verifier.get("env", {})),
        docker_image=image.strip() if image else None,
        cpus=_number(environment, "cpus"),
        memory_mb=int(m) if (m := _number(environment, "memory_mb")) is not None else None,
        allow_internet=_flag(environment, "allow_internet", True),
    )


def read_text(root: Path, relative: str, limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of ``root/relative``, at most ``limit`` bytes, no link followed."""
    try:
        fd = open_inside(root, relative)
    except FileNotFoundError:
        raise AdapterError(
            f"{root} has no {relative}: a Harbor task folder has task.toml, instruction.md, "
            "environment/Dockerfile and tests/test.sh."
        ) from None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise AdapterError(f"{root / relative} is over {limit} bytes: shorten it.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AdapterError(f"{root / relative} is not UTF-8 text ({exc}).") from None


def open_inside(root: Path, relative: str) -> int:
    """A read-only descriptor of the regular file ``root/relative``.

    Raises :class:`FileNotFoundError` when it is missing and :class:`AdapterError` when a
    component is a symbolic link or the file is not a regular one.
    """
    parts = PurePosixPath(relative).parts
    if not parts or any(part in {"..", ".", "/"} for part in parts):
        raise AdapterError(f"{relative!r} is not a plain path inside the task folder.")
    folder = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            flags = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | (os.O_NONBLOCK if last else _DIRECTORY)
            try:
                fd = os.open(part, flags, dir_fd=folder)
            except FileNotFoundError:
                raise
            except OSError:
                raise AdapterError(
                    f"{root / relative}: {part} is a symbolic link or not a plain "
                    f"{'file' if last else 'folder'}; a task folder's files must lie inside it."
                ) from None
            os.close(folder)
            folder = fd
        fd, folder = folder, -1
    finally:
        if folder != -1:
            os.close(folder)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise AdapterError(f"{root / relative} is not a regular file.")
    os.set_blocking(fd, True)
    return fd


def folder_archive(root: Path, relative: str, prefix: str = "") -> bytes:
    """A tar of the folder ``root/relative``, member names under ``prefix``.

    Regular files are read through :func:`open_inside`; symbolic links are stored as links;
    any other kind of file (FIFO, device, socket) is refused. Bounded by
    ``MAX_ARCHIVE_BYTES`` and ``MAX_ARCHIVE_FILES``.
    """
    top = root / relative
    if top.is_symlink() or not top.is_dir():
        raise AdapterError(f"{top} is not a plain folder inside the task folder.")
    buffer = io.BytesIO()
    total = files = 0
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for folder, subfolders, names in os.walk(top, followlinks=False):
            subfolders.sort()
            for name in sorted([*subfolders, *names]):
                path = Path(folder) / name
                inner = path.relative_to(top).as_posix()
                files += 1
                if files > MAX_ARCHIVE_FILES:
                    raise AdapterError(f"{top} has over {MAX_ARCHIVE_FILES} files.")
                info = tar.gettarinfo(str(path), arcname=f"{prefix}{inner}")
                if info.isfile():
                    total += info.size
                    if total > MAX_ARCHIVE_BYTES:
                        raise AdapterError(f"{top} is over {MAX_ARCHIVE_BYTES} bytes.")
                    with os.fdopen(open_inside(root, f"{relative}/{inner}"), "rb") as data:
                        tar.addfile(info, data)
                elif info.isdir() or info.issym():
                    tar.addfile(info)
                else:
                    raise AdapterError(f"{path} is not a file, folder or link: remove it.")
    return buffer.getvalue()


def _parse_toml(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AdapterError(f"{TASK_FILE} is not valid TOML ({exc}): fix it.") from None


def _table(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = config.get(name, {})
    if not isinstance(value, dict):
        raise AdapterError(f"{TASK_FILE}: {name} must be a table ([{name}]).")
    return value


def _number(table: Mapping[str, Any], key: str) -> float | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise AdapterError(f"{TASK_FILE}: {key} = {value!r} must be a positive number.")
    return float(value)


def _seconds(table: Mapping[str, Any], key: str) -> float:
    value = _number(table, key)
    return DEFAULT_TIMEOUT if value is None else value


def _flag(table: Mapping[str, Any], key: str, default: bool) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise AdapterError(f"{TASK_FILE}: {key} = {value!r} must be true or false.")
    return value


def _env(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise AdapterError(f"{TASK_FILE}: [verifier] env must be a table of strings.")
    env: dict[str, str] = {}
    for key, item in value.items():
        if not _ENV_NAME.match(key) or not isinstance(item, str | int | float | bool):
            raise AdapterError(
                f'{TASK_FILE}: [verifier] env.{key} must be NAME = "value" (a variable name).'
            )
        env[key] = str(item).lower() if isinstance(item, bool) else str(item)
    return env


def _require_file(root: Path, relative: str, why: str) -> None:
    try:
        os.close(open_inside(root, relative))
    except FileNotFoundError:
        raise AdapterError(f"{root} has no {relative} ({why}).") from None
