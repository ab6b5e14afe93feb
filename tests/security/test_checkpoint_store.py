"""Checkpoints: bounded per client and in all, private on disk, and only the server's own
(issue 30, Medium 7 and the Lows on checkpoints).

One client wrote 151 MB into ``--checkpoint-dir`` in 2.6 s; files were 0644 in a 0755
folder; a blob planted in the folder by someone else was restored; a refused fork logged
the checkpoint id at info level.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from openenv_runtime import Checkpoint, EnvError
from openenv_runtime.testing import running_server
from tests.fixtures.walk import WalkAction, WalkClient, WalkEnvironment, make_app


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


@contextmanager
def walk_server(monkeypatch: pytest.MonkeyPatch, **env: str) -> Iterator[str]:
    with monkeypatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        app = make_app(WalkEnvironment)
    with running_server(app) as url:
        yield url


def files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.ckpt"))


def test_one_client_is_refused_past_its_own_bound(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = tmp_path / "ckpts"
    with walk_server(
        monkeypatch, CHECKPOINT_DIR=str(folder), MAX_CHECKPOINTS_PER_CLIENT="3"
    ) as url:

        async def go() -> None:
            async with WalkClient(url) as env:
                await env.reset(seed=1)
                kept = [await env.checkpoint() for _ in range(3)]
                with pytest.raises(EnvError) as info:
                    await env.checkpoint()
                assert info.value.code == "CHECKPOINT_QUOTA"
                for advice in ("MAX_CHECKPOINTS_PER_CLIENT", "CHECKPOINT_TTL", "Reuse"):
                    assert advice in info.value.message
                await env.restore(kept[0])  # what it keeps still works
                assert (await env.step(WalkAction())).observation is not None

        run(go())
    assert len(files(folder)) == 3


def test_bytes_per_client_are_bounded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # each checkpoint below is about 27 kB (20 kB of ballast and the generator's state)
    settings = {"CHECKPOINT_DIR": str(tmp_path), "MAX_CHECKPOINT_BYTES_PER_CLIENT": "60000"}
    with walk_server(monkeypatch, **settings) as url:

        async def go() -> None:
            async with WalkClient(url) as env:
                await env.reset(seed=1, ballast=20_000)
                await env.checkpoint()
                await env.checkpoint()
                with pytest.raises(EnvError) as info:
                    await env.checkpoint()
                assert info.value.code == "CHECKPOINT_QUOTA"
                assert "MAX_CHECKPOINT_BYTES_PER_CLIENT" in info.value.message

        run(go())
    assert sum(p.stat().st_size for p in files(tmp_path)) <= 60_000


@pytest.mark.parametrize(
    "bound", [{"MAX_CHECKPOINTS": "3"}, {"MAX_CHECKPOINT_TOTAL_BYTES": "85000"}]
)
def test_past_the_total_the_oldest_go_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, bound: dict[str, str]
) -> None:
    with walk_server(monkeypatch, CHECKPOINT_DIR=str(tmp_path), **bound) as url:

        async def go() -> None:
            async with WalkClient(url) as env:
                await env.reset(seed=1, ballast=20_000)
                taken = []
                for _ in range(6):
                    await env.step(WalkAction())
                    taken.append(await env.checkpoint())
                with pytest.raises(EnvError) as info:
                    await env.restore(taken[0])
                assert info.value.code == "CHECKPOINT_NOT_FOUND"
                for ckpt in taken[-3:]:
                    assert (await env.restore(ckpt)).step == ckpt.step

        run(go())
    kept = files(tmp_path)
    assert len(kept) == 3 and sum(p.stat().st_size for p in kept) <= 85_000  # ~27 kB each


def test_files_are_private_to_the_servers_user(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = tmp_path / "made-by-the-server"
    with walk_server(monkeypatch, CHECKPOINT_DIR=str(folder)) as url:

        async def go() -> None:
            async with WalkClient(url) as env:
                await env.reset(seed=1)
                await env.checkpoint()

        run(go())
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    written = list(folder.iterdir())
    assert written and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in written), [
        (p.name, oct(p.stat().st_mode)) for p in written
    ]


def _planted(good: bytes, ident: str, signed: bool) -> bytes:
    """A blob for this environment with a changed state and a correct digest, written by
    someone without the server's key (in the unsigned form, or with a made-up signature)."""
    lines = good.split(b"\n", 2)
    header_line = next(line for line in lines if line.startswith(b"{"))
    header = json.loads(header_line)
    payload = json.dumps({**json.loads(good.split(header_line + b"\n", 1)[1]), "ballast": "!"})
    data = payload.encode()
    header.update(id=ident, digest="sha256:" + hashlib.sha256(data).hexdigest(), size=len(data))
    if not signed:
        header["format"] = 1
    body = json.dumps(header).encode() + b"\n" + data
    return (secrets.token_hex(32).encode() + b"\n" + body) if signed else body


@pytest.mark.parametrize("signed", [False, True])
def test_a_blob_planted_in_the_folder_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, signed: bool
) -> None:
    with walk_server(monkeypatch, CHECKPOINT_DIR=str(tmp_path)) as url:

        async def go() -> None:
            async with WalkClient(url) as env:
                await env.reset(seed=3)
                good = await env.checkpoint()
                ident = "P" * 32
                blob = _planted((tmp_path / f"{good.id}.ckpt").read_bytes(), ident, signed)
                (tmp_path / f"{ident}.ckpt").write_bytes(blob)
                with pytest.raises(EnvError) as info:
                    await env.restore(ident)
                assert info.value.code == "CHECKPOINT_CORRUPT"
                assert "signature" in info.value.message
                with pytest.raises(EnvError) as info:
                    await env.fork(Checkpoint(ident, 0, "sha256:" + "0" * 64, 0))
                assert info.value.code == "CHECKPOINT_CORRUPT"  # checked before the digest
                assert (await env.state()).step_count == 0  # untouched

        run(go())


def test_a_blob_altered_after_it_was_read_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The server keeps the folder's blob it verified last (a fork of n reads it n times):
    a change to the file, even in place and of the same size, is verified again."""
    with walk_server(monkeypatch, CHECKPOINT_DIR=str(tmp_path)) as url:

        async def go() -> None:
            async with WalkClient(url) as env:
                await env.reset(seed=3, ballast=64)
                ckpt = await env.checkpoint()
                forks = await env.fork(ckpt, n=3)  # read, verified and kept
                await asyncio.gather(*(f.close() for f in forks))
                time.sleep(0.05)  # past the file system's clock tick: the change shows in ctime
                path = tmp_path / f"{ckpt.id}.ckpt"
                with path.open("r+b") as f:  # the same file and size, one byte changed
                    data = f.read()
                    at = data.rindex(b"x")
                    f.seek(at)
                    f.write(b"y")
                for attempt in (env.restore(ckpt.id), env.fork(ckpt, n=2)):
                    with pytest.raises(EnvError) as info:
                        await attempt
                    assert info.value.code == "CHECKPOINT_CORRUPT"
                assert (await env.state()).step_count == 0  # untouched

        run(go())


def test_restore_ids_are_logged_at_debug_level_only(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="openenv_runtime")
    missing = "Q" * 32
    with walk_server(monkeypatch) as url:

        async def go() -> str:
            async with WalkClient(url) as env:
                await env.reset(seed=1)
                good = await env.checkpoint()
                with pytest.raises(EnvError):
                    await env.fork(Checkpoint(missing, 0, good.digest, 0))
                async with await env.fork(good):
                    pass
                return good.id

        good_id = run(go())
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert not [m for level, m in said if level >= logging.INFO and (missing in m or good_id in m)]
    assert [m for level, m in said if level == logging.DEBUG and missing in m]
