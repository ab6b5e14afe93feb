"""The Task API shared by adapters whose tasks are one split of indexed entries."""

from __future__ import annotations

from typing import Any

import pytest

from openenv_runtime.adapters.task_list import (
    MAX_LISTED,
    IndexedTaskApi,
    TaskCursor,
    as_index,
    episode_index,
)


class Source:
    def __init__(self, size: int) -> None:
        self.size = size

    def listing(self, index: int) -> dict[str, Any]:
        if not 0 <= index < self.size:
            raise IndexError(index)
        return {"index": index}


class Tasks(IndexedTaskApi):
    TASKS_ARE = "a test list"

    def __init__(self, size: int) -> None:
        self.source = Source(size)

    @property
    def task_source(self) -> Source:
        return self.source


def test_one_train_split_listed_by_index() -> None:
    tasks = Tasks(5)
    assert tasks.list_splits() == ["train"]
    assert tasks.num_tasks("train") == 5
    assert tasks.get_task("train", 3) == {"index": 3}
    assert tasks.get_task_range("train", 1, 3) == [{"index": 1}, {"index": 2}]
    assert tasks.get_task_range("train", -2) == [{"index": 3}, {"index": 4}]
    assert [t["index"] for t in tasks.list_tasks("train")] == [0, 1, 2, 3, 4]


def test_unknown_split_and_out_of_range_are_index_errors() -> None:
    tasks = Tasks(2)
    with pytest.raises(IndexError, match="a test list has 'train'"):
        tasks.num_tasks("test")
    with pytest.raises(IndexError):
        tasks.get_task("train", 2)


def test_a_page_is_bounded() -> None:
    tasks = Tasks(MAX_LISTED + 1)
    with pytest.raises(IndexError, match="pages of at most"):
        tasks.get_task_range("train")
    assert len(tasks.get_task_range("train", 1)) == MAX_LISTED


def test_episode_index_prefers_task_index_then_seed_then_cursor() -> None:
    cursor = TaskCursor()
    assert episode_index(4, cursor, "2", 7) == 2
    assert episode_index(4, cursor, None, 7) == 3
    assert [episode_index(4, cursor, None, None) for _ in range(5)] == [0, 1, 2, 3, 0]
    with pytest.raises(ValueError, match="integer"):
        as_index(True)
