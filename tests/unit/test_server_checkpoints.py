"""The checkpoint store: what it keeps, for how long, and what it refuses."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from openenv_runtime.server.config.fields import CHECKPOINT_BUDGET_FACTOR
from openenv_runtime.server.sessions import checkpoints
from openenv_runtime.server.sessions.checkpoints import CheckpointError, CheckpointStore


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def code_of(coro: Any) -> str:
    with pytest.raises(CheckpointError) as info:
        run(coro)
    return info.value.code


@pytest.mark.parametrize("folder", [False, True])
def test_round_trip_of_json_and_bytes(tmp_path: Path, folder: bool) -> None:
    store = CheckpointStore("env:A", tmp_path if folder else None, 1 << 20, 60.0)
    for state in ({"a": [1, 2.5, "x", None], "b": True}, b"\x00\xffraw"):
        kept = run(store.put(store.encode(state, 3, True)))
        again = run(store.get(kept.header["id"], kept.header["digest"]))
        assert again.state() == state
        assert again.info == kept.info and kept.info["step"] == 3


def test_ids_cannot_name_paths(tmp_path: Path) -> None:
    store = CheckpointStore("env:A", tmp_path, 1 << 20, None)
    for bad in ("../../etc/passwd", "a/b" * 8, "x" * 10, "", 5, None):
        assert code_of(store.get(bad)) == "CHECKPOINT_INVALID"


def test_tampered_truncated_and_foreign_blobs_are_refused(tmp_path: Path) -> None:
    store = CheckpointStore("env:A", tmp_path, 1 << 20, None)
    kept = run(store.put(store.encode({"n": 1}, 0, True)))
    ident = kept.header["id"]
    path = tmp_path / f"{ident}.ckpt"
    blob = path.read_bytes()
    path.write_bytes(blob.replace(b'{"n":1}', b'{"n":2}'))
    assert code_of(store.get(ident)) == "CHECKPOINT_CORRUPT"  # digest
    path.write_bytes(blob[:-2])
    assert code_of(store.get(ident)) == "CHECKPOINT_CORRUPT"  # size
    path.write_bytes(b"not a checkpoint")
    assert code_of(store.get(ident)) == "CHECKPOINT_CORRUPT"  # header
    other = CheckpointStore("env:B", tmp_path, 1 << 20, None)
    path.write_bytes(blob)
    assert code_of(other.get(ident)) == "CHECKPOINT_FOREIGN"
    renamed = tmp_path / ("Z" * 24 + ".ckpt")
    renamed.write_bytes(blob)
    assert code_of(store.get("Z" * 24)) == "CHECKPOINT_CORRUPT"  # its header names another id


def test_sizes_are_bounded_on_the_way_in_and_out(tmp_path: Path) -> None:
    store = CheckpointStore("env:A", tmp_path, 100, None)
    with pytest.raises(CheckpointError) as info:
        store.encode({"x": "y" * 200}, 0, True)
    assert info.value.code == "CHECKPOINT_TOO_LARGE"
    big = CheckpointStore("env:A", tmp_path, 1 << 20, None)
    kept = run(big.put(big.encode({"x": "y" * 10_000}, 0, True)))
    assert code_of(store.get(kept.header["id"])) == "CHECKPOINT_TOO_LARGE"  # not read whole


def test_unserialisable_state_is_explained() -> None:
    store = CheckpointStore("env:A", None, 1 << 20, None)
    with pytest.raises(CheckpointError, match="JSON"):
        store.encode({"x": object()}, 0, True)


def test_folder_checkpoints_expire(tmp_path: Path) -> None:
    store = CheckpointStore("env:A", tmp_path, 1 << 20, 60.0)
    old = run(store.put(store.encode({"n": 1}, 0, True)))
    path = tmp_path / f"{old.header['id']}.ckpt"
    past = time.time() - 120
    os.utime(path, (past, past))
    assert code_of(store.get(old.header["id"])) == "CHECKPOINT_NOT_FOUND"
    store._last_sweep = 0.0
    run(store.put(store.encode({"n": 2}, 0, True)))  # a later write sweeps the folder
    assert not path.exists()


def test_memory_checkpoints_expire_and_stay_within_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    store = CheckpointStore("env:A", None, 1000, 60.0)
    now = [1000.0]
    monkeypatch.setattr(checkpoints.time, "time", lambda: now[0])
    first = run(store.put(store.encode({"n": 1}, 0, True)))
    now[0] += 61
    assert code_of(store.get(first.header["id"])) == "CHECKPOINT_NOT_FOUND"
    ids = [run(store.put(store.encode("x" * 900, 0, True))).header["id"] for _ in range(20)]
    assert store.memory_bytes <= CHECKPOINT_BUDGET_FACTOR * 1000
    assert code_of(store.get(ids[0])) == "CHECKPOINT_NOT_FOUND"  # the oldest went first
    assert run(store.get(ids[-1])).state() == "x" * 900


def test_stores_sharing_a_folder_share_one_key(tmp_path: Path) -> None:
    """Workers of one server (and replicas) each open the folder: the first makes the key."""
    one = CheckpointStore("env:A", tmp_path, 1 << 20, None)
    two = CheckpointStore("env:A", tmp_path, 1 << 20, None)
    key = tmp_path / checkpoints.KEY_FILE
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32
    kept = run(one.put(one.encode({"n": 1}, 0, True)))
    assert run(two.get(kept.header["id"])).state() == {"n": 1}
    other = CheckpointStore("env:A", tmp_path, 1 << 20, None, key="another server's key")
    assert code_of(other.get(kept.header["id"])) == "CHECKPOINT_CORRUPT"


@pytest.mark.parametrize("planted", ["readable", "link"])
def test_a_key_file_that_is_not_the_servers_own_is_refused(tmp_path: Path, planted: str) -> None:
    key = tmp_path / checkpoints.KEY_FILE
    if planted == "readable":
        key.write_bytes(b"k" * 32)
        key.chmod(0o644)
    else:
        (tmp_path / "elsewhere").write_bytes(b"k" * 32)
        (tmp_path / "elsewhere").chmod(0o600)
        key.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PermissionError, match="CHECKPOINT_KEY"):
        CheckpointStore("env:A", tmp_path, 1 << 20, None)


def test_a_link_planted_at_a_checkpoints_name_is_not_followed(tmp_path: Path) -> None:
    store = CheckpointStore("env:A", tmp_path / "ckpts", 1 << 20, None)
    kept = run(store.put(store.encode({"n": 1}, 0, True)))
    ident = kept.header["id"]
    moved = tmp_path / "moved.ckpt"
    (tmp_path / "ckpts" / f"{ident}.ckpt").rename(moved)
    (tmp_path / "ckpts" / f"{ident}.ckpt").symlink_to(moved)
    assert code_of(store.get(ident)) == "CHECKPOINT_CORRUPT"


@pytest.mark.parametrize("folder", [False, True])
def test_client_bounds_refuse_one_client_and_not_another(tmp_path: Path, folder: bool) -> None:
    bounds = checkpoints.CheckpointBounds(100, 1 << 20, client_count=2)
    store = CheckpointStore("env:A", tmp_path if folder else None, 1 << 20, 60.0, bounds=bounds)
    for _ in range(2):
        run(store.put(store.encode({"n": 1}, 0, True, "addr:a")))
    with pytest.raises(CheckpointError) as info:
        run(store.put(store.encode({"n": 1}, 0, True, "addr:a")))
    assert info.value.code == "CHECKPOINT_QUOTA" and info.value.status == 429
    assert "CHECKPOINT_TTL" in info.value.message
    run(store.put(store.encode({"n": 1}, 0, True, "addr:b")))  # another client is not held back


@pytest.mark.parametrize("folder", [False, True])
def test_past_the_total_count_the_oldest_go_first(tmp_path: Path, folder: bool) -> None:
    bounds = checkpoints.CheckpointBounds(3, 1 << 20)
    store = CheckpointStore("env:A", tmp_path if folder else None, 1 << 20, None, bounds=bounds)
    ids = []
    for n in range(5):
        ids.append(run(store.put(store.encode({"n": n}, 0, True))).header["id"])
        if folder:  # file times order the folder; make them distinct whatever the clock
            os.utime(tmp_path / f"{ids[-1]}.ckpt", (1000.0 + n, time.time() - 10 + n))
    for gone in ids[:2]:
        assert code_of(store.get(gone)) == "CHECKPOINT_NOT_FOUND"
    assert [run(store.get(i)).state()["n"] for i in ids[2:]] == [2, 3, 4]


def test_the_total_counts_every_writer_sharing_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoints, "RELIST_S", 0.0)  # list the folder on every write
    bounds = checkpoints.CheckpointBounds(3, 1 << 20)
    one, two = (CheckpointStore("env:A", tmp_path, 1 << 20, None, bounds=bounds) for _ in "12")
    for store in (one, two, one, two, one):
        run(store.put(store.encode({"n": 1}, 0, True)))
    assert len(list(tmp_path.glob("*.ckpt"))) == 3
