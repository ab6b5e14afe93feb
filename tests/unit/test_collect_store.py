"""The collection folder: plan, shards, resume checks (openenv_cli.collect.spec / store)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from openenv_cli.collect.episodes import new_row
from openenv_cli.collect.spec import CollectSpec, plan
from openenv_cli.collect.store import Store, read_rows
from openenv_cli.errors import OpenEnvError, UsageError

SPEC = CollectSpec(
    targets=("http://127.0.0.1:1",), episodes=10, group_size=3, seed=7, policy="random"
)


def test_plan_groups_share_a_seed_and_groups_differ() -> None:
    items = plan(SPEC)
    assert [p.seed for p in items] == [7, 7, 7, 8, 8, 8, 9, 9, 9, 10]
    assert len({p.episode_id for p in items}) == 10
    assert plan(SPEC) == items


def test_tasks_follow_groups() -> None:
    items = plan(replace(SPEC, tasks=("a", "b")))
    assert [p.task_id for p in items] == ["a"] * 3 + ["b"] * 3 + ["a"] * 3 + ["b"]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_shards_round_trip_and_resume_sees_them(tmp_path: Path, fmt: str) -> None:
    spec = replace(SPEC, format=fmt)
    store = Store(tmp_path / "out", spec)
    assert store.open(False, {}) == set()
    rows = [new_row(p) for p in plan(spec)[:4]]
    store.write_shard(rows[:2])
    store.write_shard(rows[2:])
    (store.data / "shard-00099.parquet.tmp").write_bytes(b"half a shard")
    again = Store(tmp_path / "out", spec)
    assert again.open(True, {}) == {r["episode_id"] for r in rows}
    assert not list(again.data.glob("*.tmp"))
    assert [r["episode_id"] for r in read_rows(tmp_path / "out")] == [r["episode_id"] for r in rows]


def _started(out: Path, provenance: dict[str, Any] | None = None) -> Store:
    store = Store(out, SPEC)
    store.open(False, provenance or {})
    store.start()
    return store


def test_a_new_run_writes_nothing_before_its_first_shard(tmp_path: Path) -> None:
    out = tmp_path / "new"
    store = Store(out, SPEC)
    assert store.open(False, {}) == set() and not out.exists()
    assert Store(out, SPEC).open(False, {}) == set()  # nothing to resume, nothing refused
    store.write_shard([new_row(plan(SPEC)[0])])
    assert (out / "run.json").is_file() and len(store.shards()) == 1


def test_an_existing_run_needs_resume(tmp_path: Path) -> None:
    _started(tmp_path)
    with pytest.raises(UsageError, match="--resume"):
        Store(tmp_path, SPEC).open(False, {})


def test_resume_with_other_options_names_them(tmp_path: Path) -> None:
    _started(tmp_path)
    with pytest.raises(UsageError, match=r"episodes: 10 -> 11"):
        Store(tmp_path, replace(SPEC, episodes=11)).open(True, {})


def test_a_foreign_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not empty"):
        Store(tmp_path, SPEC).open(False, {})


def test_a_duplicated_episode_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path, SPEC)
    store.open(False, {})
    row = new_row(plan(SPEC)[0])
    store.write_shard([row])
    store.write_shard([row])
    with pytest.raises(OpenEnvError, match="appears twice"):
        Store(tmp_path, SPEC).open(True, {})


def test_run_record_holds_provenance(tmp_path: Path) -> None:
    _started(tmp_path, {"environment": {"name": "echo"}})
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["provenance"]["environment"]["name"] == "echo"
    assert record["options"]["seed"] == 7


def test_a_push_with_a_secret_in_an_episode_is_refused(tmp_path: Path) -> None:
    from openenv_cli.collect.hub import push_dataset, scan_collection

    store = Store(tmp_path, SPEC)
    store.open(False, {})
    row = new_row(plan(SPEC)[0])
    leaked = "AKIA" + "IOSFODNN7EXAMPLE"  # an AWS access key id, as an environment might echo it
    row["observations"] = [json.dumps({"text": f"key={leaked}"})]
    store.write_shard([row])
    assert "episode ep-0000000: AWS Access Key" in scan_collection(tmp_path)
    with pytest.raises(OpenEnvError, match="Not pushed"):
        push_dataset(tmp_path, "alice/leak", private=True, token="unused")


def test_credentials_in_urls_are_refused() -> None:
    from openenv_cli.collect.runner import validate_spec

    with pytest.raises(UsageError, match="user name or password"):
        validate_spec(replace(SPEC, targets=("http://bob:hunter2@127.0.0.1:8000",)))
    with pytest.raises(UsageError, match="user name or password"):
        validate_spec(replace(SPEC, policy="model", llm="https://k:s@llm.local", model="m"))


def test_a_full_disk_keeps_the_written_shards_and_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    store = Store(tmp_path, SPEC)
    store.open(False, {})
    rows = [new_row(p) for p in plan(SPEC)[:2]]
    store.write_shard(rows[:1])

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OpenEnvError, match="disk is full") as raised:
        store.write_shard(rows[1:])
    assert "--resume" in str(raised.value)
    monkeypatch.undo()
    assert not list(store.data.glob("*.tmp"))
    assert Store(tmp_path, SPEC).open(True, {}) == {rows[0]["episode_id"]}


def test_the_card_counts_every_row_on_disk(tmp_path: Path) -> None:
    store = _started(tmp_path, {"environment": {"name": "echo"}})
    rows = [new_row(p) for p in plan(SPEC)[:4]]
    for row, reward in zip(rows, (1.0, 0.5, 0.0, 0.5), strict=True):
        row["total_reward"] = reward
    rows[2]["error"], rows[2]["error_kind"] = "broke", "env:EXECUTION_ERROR"
    store.write_shard(rows[:3])
    store.write_shard(rows[3:])
    resumed = Store(tmp_path, SPEC)
    resumed.open(True, {"environment": {"name": "another"}})
    assert resumed.write_card() == {"episodes": 4, "mean_reward": 0.5, "errors": 1}
    card = (tmp_path / "README.md").read_text()
    assert "4 episodes, mean total reward 0.5000" in card and "1 with errors" in card
    assert "# Episodes of echo" in card  # the run's own provenance, as first recorded
