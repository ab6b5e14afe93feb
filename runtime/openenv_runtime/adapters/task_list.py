"""The Task API of an adapter whose tasks are one split of indexed entries.

A family whose episodes are the entries of one list (a reasoning-gym dataset, a verifiers
taskset) keeps them in a source with a ``size`` and a per-index ``listing``; its environment
inherits :class:`IndexedTaskApi` for ``list_splits`` / ``num_tasks`` / ``get_task`` /
``get_task_range`` / ``list_tasks`` and calls :func:`episode_index` to pick a reset's entry.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, ClassVar, Protocol

SPLIT = "train"
# Entries one Task API request may list (each may be built on demand).
MAX_LISTED = 10_000


class IndexedTasks(Protocol):
    """A source of ``size`` tasks, listed by index for the Task API."""

    @property
    def size(self) -> int: ...

    def listing(self, index: int) -> dict[str, Any]:
        """Task ``index`` as a client may see it; ``IndexError`` outside ``0..size-1``."""
        ...


class TaskCursor:
    """The next task of a bare ``reset()``: one cursor shared by every session of a server,
    so sessions collecting in parallel get different tasks."""

    def __init__(self) -> None:
        self._count = itertools.count()
        self._lock = threading.Lock()

    def next(self, size: int) -> int:
        with self._lock:
            return next(self._count) % size


class IndexedTaskApi:
    """The Task API methods over ``task_source``: one split, ``train``, of its entries.

    ``TASKS_ARE`` says what the entries are in an error message ("a reasoning-gym dataset").
    An unknown split or an index out of range raises ``IndexError``, which the Task API
    answers as a client error (400), not a server fault.
    """

    TASKS_ARE: ClassVar[str] = "this environment"

    @property
    def task_source(self) -> IndexedTasks:
        raise NotImplementedError

    def list_splits(self) -> list[str]:
        return [SPLIT]

    def num_tasks(self, split: str) -> int:
        check_split(split, self.TASKS_ARE)
        return self.task_source.size

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        check_split(split, self.TASKS_ARE)
        return self.task_source.listing(index)

    def get_task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[dict[str, Any]]:
        check_split(split, self.TASKS_ARE)
        source = self.task_source
        indices = range(source.size)[start:stop]
        if len(indices) > MAX_LISTED:
            raise IndexError(
                f"{len(indices)} tasks asked at once; ask task_range in pages of at most "
                f"{MAX_LISTED} (start, stop)"
            )
        return [source.listing(i) for i in indices]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return self.get_task_range(split)


def check_split(split: str | None, tasks_are: str) -> None:
    """Refuse a split other than ``train`` (``None``: the reset named none)."""
    if split is not None and split != SPLIT:
        raise IndexError(f"split {split!r} does not exist: {tasks_are} has {SPLIT!r}")


def as_index(value: Any) -> int:
    """A task index or seed from a reset message (an int, or a string of one)."""
    if isinstance(value, bool):
        raise ValueError(f"task_index must be an integer, not {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"task_index must be an integer, not {value!r}") from None


def episode_index(
    size: int, cursor: TaskCursor, task_index: int | str | None, seed: int | None
) -> int:
    """The task a reset starts: ``task_index`` when given, else ``seed % size``, else the
    shared cursor's next."""
    if task_index is not None:
        return as_index(task_index)
    if seed is not None:
        return as_index(seed) % size
    return cursor.next(size)
