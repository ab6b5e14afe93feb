"""Task ids and the system prompt from local files (openenv_cli.collect.inputs)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from openenv_cli.collect.inputs import read_tasks, read_text, task_option
from openenv_cli.collect.spec import CollectSpec
from openenv_cli.errors import UsageError


def test_tasks_from_text_json_lines_and_json(tmp_path: Path) -> None:
    (tmp_path / "ids.txt").write_text("a\n\n b \n")
    (tmp_path / "rows.jsonl").write_text('{"task_id": "t1"}\n{"id": 7}\n"plain"\n')
    (tmp_path / "list.json").write_text(json.dumps([{"name": "n"}, "x", {"other": 1}]))
    assert read_tasks(tmp_path / "ids.txt") == ("a", "b")
    assert read_tasks(tmp_path / "rows.jsonl") == ("t1", "7", "plain")
    assert read_tasks(tmp_path / "list.json") == ("n", "x", "2")


def test_tasks_from_a_dataset_folder(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    data = tmp_path / "dataset" / "data"
    data.mkdir(parents=True)
    pq.write_table(pa.table({"task_id": ["p1", "p2"]}), data / "train-00000.parquet")
    (data / "train-00001.jsonl").write_text('{"task_id": "j1"}\n')
    (tmp_path / "dataset" / "notes.md").write_text("ignored")
    assert read_tasks(tmp_path / "dataset") == ("p1", "p2", "j1")


def test_task_option_says_what_is_wrong(tmp_path: Path) -> None:
    assert task_option("split=test", None) == ("test", ())
    assert task_option(None, None) == (None, ())
    (tmp_path / "t.txt").write_text("a\n")
    assert task_option(str(tmp_path / "t.txt"), None) == (None, ("a",))
    assert task_option(None, tmp_path / "t.txt") == (None, ("a",))
    with pytest.raises(UsageError, match="not both"):
        task_option("split=x", tmp_path / "t.txt")
    with pytest.raises(UsageError, match="no such file"):
        task_option(str(tmp_path / "missing.txt"), None)
    (tmp_path / "empty.txt").write_text("\n")
    with pytest.raises(UsageError, match="lists no tasks"):
        read_tasks(tmp_path / "empty.txt")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UsageError, match="not valid JSON"):
        read_tasks(tmp_path / "bad.json")


def test_system_prompt_text_or_file(tmp_path: Path) -> None:
    (tmp_path / "prompt.md").write_text("You play well.\n")
    assert read_text(str(tmp_path / "prompt.md"), "--system-prompt") == "You play well.\n"
    assert read_text("Be brief.", "--system-prompt") == "Be brief."
    assert read_text("x" * 10_000, "--system-prompt") == "x" * 10_000


def test_the_system_prompt_is_part_of_the_run_only_when_set() -> None:
    spec = CollectSpec(targets=("http://127.0.0.1:1",), episodes=2)
    assert "system_prompt" not in spec.fingerprint_fields()  # older runs still resume
    prompted = replace(spec, system_prompt="Be brief.")
    assert prompted.fingerprint_fields()["system_prompt"] == "Be brief."
    assert prompted.fingerprint() != spec.fingerprint()
