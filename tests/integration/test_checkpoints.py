"""Checkpoint, restore and fork against real servers (threads and separate processes)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from openenv_runtime import Checkpoint, EnvError, StepResult
from openenv_runtime.server.sessions.checkpoints import CheckpointStore
from openenv_runtime.testing import free_port, running_server
from tests.fixtures.counter import CounterClient, Lifecycle
from tests.fixtures.counter import make_app as counter_app
from tests.fixtures.walk import (
    BytesWalkEnvironment,
    WalkAction,
    WalkClient,
    WalkEnvironment,
    make_app,
)
from tests.support.servers import (
    active_sessions,
    post_json,
    spawn_server,
    stop_process,
    wait_until,
)

pytestmark = pytest.mark.integration


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


@contextmanager
def walk_server(
    monkeypatch: pytest.MonkeyPatch, bytes_state: bool = False, **env: str
) -> Iterator[str]:
    """An in-process walk server; ``env`` are its settings' environment variables."""
    with monkeypatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        app = make_app(BytesWalkEnvironment if bytes_state else WalkEnvironment)
    with running_server(app) as url:
        yield url


def moves(n: int, offset: int = 0) -> list[WalkAction]:
    return [WalkAction(move=(i * 7 + offset) % 5 - 2) for i in range(n)]


def test_restore_returns_to_the_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    with walk_server(monkeypatch) as url:

        async def go() -> None:
            async with WalkClient(url) as env:
                await env.reset(seed=3)
                for action in moves(4):
                    await env.step(action)
                ckpt = await env.checkpoint()
                assert isinstance(ckpt, Checkpoint) and ckpt.step == 4
                assert ckpt.digest.startswith("sha256:") and ckpt.size > 0
                after = [(await env.step(a)).observation for a in moves(3, 1)]
                assert await env.restore(ckpt) == ckpt
                assert (await env.state()).step_count == 4
                again = [(await env.step(a)).observation for a in moves(3, 1)]
                assert again == after  # the generator's state came back too

        run(go())


def test_fork_is_an_independent_session_with_the_same_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with walk_server(monkeypatch) as url:

        async def go() -> None:
            async with WalkClient(url) as env:
                await env.reset(seed=5)
                await env.step(WalkAction(move=2))
                branch = await env.fork()
                try:
                    assert active_sessions(url) == 2  # its own session
                    assert await branch.state() == await env.state()
                    a = await env.step(WalkAction(move=1))
                    b = await branch.step(WalkAction(move=1))
                    assert a.observation == b.observation
                    await branch.step(WalkAction(move=3))  # the branch moves on alone
                    assert (await env.state()).step_count == 2
                    assert (await branch.state()).step_count == 3
                finally:
                    await branch.close()
                # a fork from an earlier checkpoint
                ckpt = await env.checkpoint()
                await env.step(WalkAction())
                async with await env.fork(ckpt) as old:
                    assert (await old.state()).step_count == ckpt.step

        run(go())


def test_fork_n_gives_n_independent_sessions_from_one_checkpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with walk_server(monkeypatch) as url:

        async def go() -> None:
            async with WalkClient(url) as env:
                await env.reset(seed=7, ballast=1000)
                for action in moves(3):
                    await env.step(action)
                forks = await env.fork(n=8)
                try:
                    assert isinstance(forks, list) and len(forks) == 8
                    assert all(isinstance(f, WalkClient) for f in forks)
                    assert active_sessions(url) == 9  # a session each
                    state = await env.state()
                    assert [await f.state() for f in forks] == [state] * 8
                    expected = (await env.step(WalkAction(move=1))).observation
                    for f in forks:  # every fork takes the same next step
                        assert (await f.step(WalkAction(move=1))).observation == expected
                    await forks[0].step(WalkAction(move=2))  # one moves on alone
                    counts = [(await f.state()).step_count for f in forks]
                    assert counts == [5] + [4] * 7
                finally:
                    await asyncio.gather(*(f.close() for f in forks))
                assert active_sessions(url) == 1
                # fork() without n still gives one client
                single = await env.fork()
                assert isinstance(single, WalkClient)
                await single.close()

        run(go())


def test_fork_n_opens_all_or_none(monkeypatch: pytest.MonkeyPatch) -> None:
    with walk_server(monkeypatch, MAX_CONCURRENT_ENVS="4") as url:

        async def go() -> None:
            async with WalkClient(url) as env:
                await env.reset(seed=1)
                with pytest.raises(EnvError) as info:
                    await env.fork(n=5)  # room for 3 more sessions only
                assert info.value.code == "CAPACITY_REACHED"
                assert wait_until(lambda: active_sessions(url) == 1)  # the opened ones closed
                forks = await env.fork(n=3)
                await asyncio.gather(*(f.close() for f in forks))
                with pytest.raises(ValueError):
                    await env.fork(n=0)

        run(go())


def test_sync_fork_n(monkeypatch: pytest.MonkeyPatch) -> None:
    with walk_server(monkeypatch) as url, WalkClient(url).sync() as env:
        env.reset(seed=2)
        env.step(WalkAction())
        forks = env.fork(n=3)
        try:
            assert len(forks) == 3
            assert {f.step(WalkAction()).observation.noise for f in forks} == {
                env.step(WalkAction()).observation.noise
            }
        finally:
            for f in forks:
                f.close()


def test_sync_forms_and_bytes_state(monkeypatch: pytest.MonkeyPatch) -> None:
    with walk_server(monkeypatch, bytes_state=True) as url, WalkClient(url).sync() as env:
        env.reset(seed=1)
        env.step(WalkAction())
        ckpt = env.checkpoint()
        nxt = env.step(WalkAction()).observation
        fork = env.fork(ckpt)
        try:
            assert fork.step(WalkAction()).observation == nxt
        finally:
            fork.close()
        env.restore(ckpt.id)  # a bare id works too
        assert env.step(WalkAction()).observation == nxt


def test_environments_without_checkpoints_refuse_clearly() -> None:
    with running_server(counter_app(Lifecycle())) as url:

        async def go() -> None:
            async with CounterClient(url) as env:
                await env.reset()
                with pytest.raises(EnvError) as info:
                    await env.checkpoint()
                assert info.value.code == "CHECKPOINT_UNSUPPORTED"
                assert "SUPPORTS_CHECKPOINT = True" in info.value.message
                assert (await env.step({"delta": 2})).observation.total == 2  # session goes on

        run(go())


def test_a_memory_store_is_per_server(monkeypatch: pytest.MonkeyPatch) -> None:
    with walk_server(monkeypatch) as one, walk_server(monkeypatch) as two:

        async def go() -> None:
            async with WalkClient(one) as a, WalkClient(two) as b:
                await a.reset(seed=1)
                ckpt = await a.checkpoint()
                await b.reset(seed=2)
                with pytest.raises(EnvError) as info:
                    await b.restore(ckpt)
                assert info.value.code == "CHECKPOINT_NOT_FOUND"
                assert "CHECKPOINT_DIR" in info.value.message

        run(go())


def test_bad_checkpoints_are_refused_and_start_no_session(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = str(tmp_path)
    with walk_server(monkeypatch, CHECKPOINT_DIR=folder) as url:

        async def go() -> None:
            async with WalkClient(url) as env:
                await env.reset(seed=9)
                await env.step(WalkAction())
                good = await env.checkpoint()
                path = tmp_path / f"{good.id}.ckpt"
                # corrupt: one byte of the payload changed
                blob = bytearray(path.read_bytes())
                blob[-3] = ord("7") if blob[-3] != ord("7") else ord("8")
                path.write_bytes(bytes(blob))
                with pytest.raises(EnvError) as info:
                    await env.restore(good)
                assert info.value.code == "CHECKPOINT_CORRUPT"
                assert (await env.state()).step_count == 1  # untouched
                with pytest.raises(EnvError) as info:
                    await env.fork(good)
                assert info.value.code == "CHECKPOINT_CORRUPT"
                assert active_sessions(url) == 1  # the refused fork started no session
                # foreign: a blob another environment wrote into the shared folder
                other = CheckpointStore("walk:BytesWalkEnvironment", folder, 1 << 20, None)
                foreign = await other.put(other.encode({"x": 1}, 0, True))
                with pytest.raises(EnvError) as info:
                    await env.restore(foreign.header["id"])
                assert info.value.code == "CHECKPOINT_FOREIGN"
                # a digest that does not match the stored one
                fresh = await env.checkpoint()
                wrong = Checkpoint(fresh.id, fresh.step, "sha256:" + "0" * 64, fresh.size)
                with pytest.raises(EnvError) as info:
                    await env.restore(wrong)
                assert info.value.code == "CHECKPOINT_MISMATCH"
                # an id that tries to leave the folder
                (tmp_path.parent / "outside.ckpt").write_bytes(path.read_bytes())
                with pytest.raises(EnvError) as info:
                    await env.restore("../outside")
                assert info.value.code == "CHECKPOINT_INVALID"
                assert active_sessions(url) == 1

        run(go())


def test_checkpoint_size_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    with walk_server(monkeypatch, MAX_CHECKPOINT_BYTES="20000") as url:

        async def go() -> None:
            async with WalkClient(url) as env:
                await env.reset(seed=1, ballast=50_000)
                with pytest.raises(EnvError) as info:
                    await env.checkpoint()
                assert info.value.code == "CHECKPOINT_TOO_LARGE"
                assert "MAX_CHECKPOINT_BYTES" in info.value.message

        run(go())


def test_forks_count_against_capacity_and_the_per_client_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with walk_server(monkeypatch, MAX_CONCURRENT_ENVS="2") as url:

        async def go() -> None:
            async with WalkClient(url) as env:
                await env.reset(seed=1)
                first = await env.fork()
                with pytest.raises(EnvError) as info:
                    await env.fork()
                assert info.value.code == "CAPACITY_REACHED"
                await first.close()

        run(go())
    with walk_server(monkeypatch, MAX_SESSIONS_PER_CLIENT="1") as url:

        async def capped() -> None:
            async with WalkClient(url) as env:
                await env.reset(seed=1)
                with pytest.raises(EnvError) as info:
                    await env.fork()
                assert info.value.code == "CAPACITY_REACHED"
                assert "MAX_SESSIONS_PER_CLIENT" in info.value.message

        run(capped())


def test_http_checkpoint_and_restore(monkeypatch: pytest.MonkeyPatch) -> None:
    with walk_server(monkeypatch) as url:
        status, opened = post_json(url + "/reset", {"seed": 4})
        assert status == 200
        sid = opened["session_id"]
        post_json(url + "/step", {"session_id": sid, "action": {"move": 1}})
        status, ckpt = post_json(url + "/checkpoint", {"session_id": sid})
        assert status == 200 and ckpt["step"] == 1
        _, first = post_json(url + "/step", {"session_id": sid, "action": {"move": 1}})
        status, _ = post_json(url + "/restore", {"session_id": sid, "id": ckpt["id"]})
        assert status == 200
        _, again = post_json(url + "/step", {"session_id": sid, "action": {"move": 1}})
        assert again["observation"] == first["observation"]
        # without session_id: a new session starts from the checkpoint
        status, new = post_json(url + "/restore", {"id": ckpt["id"], "digest": ckpt["digest"]})
        assert status == 200 and new["session_id"] != sid
        _, branch = post_json(
            url + "/step", {"session_id": new["session_id"], "action": {"move": 1}}
        )
        assert branch["observation"] == first["observation"]
        before = active_sessions(url)
        status, refused = post_json(url + "/restore", {"id": "A" * 24})
        assert status == 404 and refused["code"] == "CHECKPOINT_NOT_FOUND"
        assert active_sessions(url) == before


def test_an_episode_survives_a_killed_server(tmp_path: Path) -> None:
    """SIGKILL the server mid-episode; a second server continues from the last checkpoint."""
    env = {"CHECKPOINT_DIR": str(tmp_path)}
    first = spawn_server("tests.fixtures.walk:app", free_port(), env=env)
    second = None
    try:
        url = f"http://127.0.0.1:{first.args[first.args.index('--port') + 1]}"

        async def before_kill() -> tuple[Checkpoint, list[Any]]:
            env_client = WalkClient(url, resume=False)
            await env_client.connect()
            await env_client.reset(seed=11)
            for action in moves(6):
                await env_client.step(action)
            ckpt = await env_client.checkpoint()
            expected = [(await env_client.step(a)).observation for a in moves(4, 2)]
            env_client.abort()
            return ckpt, expected

        ckpt, expected = run(before_kill())
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        second = spawn_server("tests.fixtures.walk:app", free_port(), env=env)
        url2 = f"http://127.0.0.1:{second.args[second.args.index('--port') + 1]}"

        async def after() -> None:
            async with WalkClient(url2) as env_client:
                await env_client.restore(ckpt)  # no reset first
                got = [(await env_client.step(a)).observation for a in moves(4, 2)]
                assert got == expected
                result = await env_client.step(WalkAction())
                assert isinstance(result, StepResult)

        run(after())
    finally:
        stop_process(first)
        if second is not None:
            stop_process(second)


def test_a_fork_on_a_server_that_ignores_the_header_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old_app = make_app(WalkEnvironment)
    old_app.ws_endpoint.checkpoints = None  # type: ignore[attr-defined]  # as an older server
    with walk_server(monkeypatch) as new, running_server(old_app) as old:

        async def go() -> None:
            async with WalkClient(new) as a, WalkClient(old) as b:
                await a.reset(seed=1)
                await a.step(WalkAction())
                ckpt = await a.checkpoint()
                with pytest.raises(EnvError) as info:
                    await b.fork(ckpt)
                assert info.value.code == "CHECKPOINT_UNSUPPORTED"
                assert "older server" in info.value.message
                assert wait_until(lambda: active_sessions(old) == 1)  # the fresh one closed

        run(go())
