"""What a run reads from local files: its task ids, its system prompt.

Tasks: a text file (one id a line), JSON lines or a JSON list (objects with ``task_id``,
``id`` or ``name``, or plain ids), or a dataset folder (its ``*.jsonl``, ``*.json`` and
``*.parquet`` files, ``data/`` included, read in name order). Read once, before the run: the
ids are part of the run's options, so a resumed run sees the same tasks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openenv_cli.errors import UsageError

MAX_TEXT_BYTES = 1 << 20  # a system prompt file larger than this is a mistake
_DATA_SUFFIXES = (".jsonl", ".json", ".parquet", ".txt")


def task_id(task: Any, index: int) -> str:
    """A task's id: its ``task_id``/``id``/``name`` field, the task itself when a string or
    number, else its index."""
    if isinstance(task, dict):
        for key in ("task_id", "id", "name"):
            if key in task:
                return str(task[key])
        return str(index)
    return str(task)


def task_option(tasks: str | None, tasks_file: Path | None) -> tuple[str | None, tuple[str, ...]]:
    """``--tasks`` (``split=NAME``, or a file or folder) and ``--tasks-file`` as (the split
    to ask the server for, the task ids read here)."""
    if tasks and tasks_file:
        raise UsageError("Give --tasks or --tasks-file, not both.")
    if tasks and tasks.startswith("split="):
        split = tasks.removeprefix("split=")
        if not split:
            raise UsageError(f"--tasks {tasks!r}: expected split=NAME.")
        return split, ()
    source = Path(tasks) if tasks else tasks_file
    return None, read_tasks(source) if source is not None else ()


def read_tasks(path: Path, flag: str = "--tasks") -> tuple[str, ...]:
    """The task ids in ``path`` (a file or a dataset folder); see the module's docstring."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _DATA_SUFFIXES)
        if not files:
            raise UsageError(
                f"{flag} {path}: the folder holds no .jsonl, .json, .parquet or .txt file."
            )
    elif path.is_file():
        files = [path]
    else:
        raise UsageError(f"{flag} {path}: no such file or folder.")
    tasks: list[Any] = []
    for file in files:
        tasks += _records(file, flag)
    ids = [task_id(task, index) for index, task in enumerate(tasks)]
    if not ids:
        raise UsageError(f"{flag} {path} lists no tasks.")
    return tuple(ids)


def _records(file: Path, flag: str) -> list[Any]:
    if file.suffix == ".parquet":
        import pyarrow.parquet as pq

        records: list[Any] = pq.read_table(file).to_pylist()
        return records
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{flag} {file}: {error}") from None
    try:
        if file.suffix == ".json":
            data = json.loads(text)
            return list(data) if isinstance(data, list) else [data]
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return [json.loads(line) if line.startswith(("{", '"')) else line for line in lines]
    except json.JSONDecodeError as error:
        raise UsageError(f"{flag} {file}: not valid JSON ({error}).") from None


def read_text(value: str, flag: str) -> str:
    """``value``, or the text of the file it names (an existing file's path)."""
    path = Path(value)
    try:
        is_file = len(value) < 4096 and path.is_file()
    except OSError:  # a long prompt is no path
        is_file = False
    if not is_file:
        return value
    if path.stat().st_size > MAX_TEXT_BYTES:
        raise UsageError(f"{flag} {path}: larger than {MAX_TEXT_BYTES} bytes.")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{flag} {path}: {error}") from None
