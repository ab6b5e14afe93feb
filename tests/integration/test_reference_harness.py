"""The openenv-core harness itself: reference server + reference client, no code of ours.

If these pass, a failing compat test points at our runtime, not at the harness. They
also pin the reference behaviours that docs/reference-notes.md describes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.reference import (
    free_port,
    reference_python,
    reference_server,
    run_reference_client,
    start_reference_server,
    stop_server,
    wait_until_healthy,
)

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def ref_python() -> Any:
    return reference_python()  # the first build takes about a minute


@pytest.fixture(scope="module")
def echo_server(ref_python: Any) -> Iterator[str]:
    # --metadata: the environment sets Observation.metadata; does it reach the client?
    with reference_server(env="echo", max_concurrent_envs=4, metadata=True) as (_, url):
        yield url


def _obs(message: str) -> dict[str, Any]:
    return {"echoed_message": message, "message_length": len(message)}


READY = {"echoed_message": "ready", "message_length": 0}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_reference_client_episode_against_reference_server(echo_server: str, mode: str) -> None:
    out = run_reference_client(echo_server, mode=mode)

    assert out["reference_version"] == "0.3.0"
    assert out["ws_url"] == echo_server.replace("http://", "ws://") + "/ws"

    assert out["reset"]["observation"] == READY
    assert out["reset"]["reward"] == 0.0
    assert out["reset"]["done"] is False

    hello, abc = out["steps"]
    assert hello["observation"] == _obs("Hello")
    assert hello["reward"] == pytest.approx(0.5)
    assert abc["observation"] == _obs("abc")
    assert abc["reward"] == pytest.approx(0.3)
    assert [hello["done"], abc["done"]] == [False, False]
    # reward and done travel in the envelope, never inside the observation body
    for step in (out["reset"], hello, abc):
        assert set(step["raw"]) == {"observation", "reward", "done"}

    # Reference defect: Observation.metadata is dropped by the server.
    assert hello["metadata_on_wire"] is False
    assert hello["metadata"] == {}

    assert out["state"]["step_count"] == 2
    assert isinstance(out["state"]["episode_id"], str)

    # The reference client turns an error reply into a bare RuntimeError.
    assert out["error"] == {
        "type": "RuntimeError",
        "module": "builtins",
        "message": "Server error: Invalid message (code: VALIDATION_ERROR)",
        "attributes": [],
    }
    # ... and the session survives a validation error.
    assert out["after_error"]["observation"] == _obs("after")

    assert out["closed"] is True
    assert out["close"]["code"] == 1000


def _ws_exchange(
    url: str, frames: list[str], replies: int
) -> tuple[list[dict[str, Any]], int | None]:
    """Send frames over a raw WebSocket (system python); collect replies and close code."""
    import websockets

    async def go() -> tuple[list[dict[str, Any]], int | None]:
        got: list[dict[str, Any]] = []
        async with websockets.connect(url.replace("http://", "ws://") + "/ws") as ws:
            for frame in frames:
                await ws.send(frame)
            try:
                for _ in range(replies):
                    got.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))  # noqa: PERF401 (each awaits)
                await asyncio.wait_for(ws.recv(), 10)
            except websockets.ConnectionClosed:
                pass
            except TimeoutError:
                return got, None
            return got, ws.close_code

    return asyncio.run(go())


def test_reference_server_raw_frames(echo_server: str) -> None:
    replies, code = _ws_exchange(
        echo_server,
        [
            '{"type":"reset","data":{"episode_id":"ep-1"}}',
            '{"type":"step","data":{"message":"Hello"}}',
            '{"type":"state"}',
            '{"type":"step","data":{"message":"Hello","bogus":1}}',
            '{"type":"nope"}',
            "not json",
            '{"type":"close"}',
        ],
        replies=6,
    )
    reset, step, state, invalid, unknown, bad_json = replies
    assert reset == {
        "type": "observation",
        "data": {"observation": READY, "reward": 0.0, "done": False},
    }
    assert step["data"] == {"observation": _obs("Hello"), "reward": 0.5, "done": False}
    assert state == {"type": "state", "data": {"episode_id": "ep-1", "step_count": 1}}
    assert invalid["type"] == "error"
    assert invalid["data"]["code"] == "VALIDATION_ERROR"
    assert invalid["data"]["message"] == "Invalid message"
    assert invalid["data"]["errors"][0]["type"] == "extra_forbidden"
    assert unknown["data"] == {"message": "Unknown message type: nope", "code": "UNKNOWN_TYPE"}
    assert bad_json["data"]["code"] == "INVALID_JSON"
    assert code == 1000


def test_reference_capacity_reached_then_close_1000(ref_python: Any) -> None:
    port = free_port()
    proc = start_reference_server(port, env="echo", max_concurrent_envs=1)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_healthy(url, proc)
        import websockets

        async def go() -> tuple[dict[str, Any], int | None]:
            ws_url = f"ws://127.0.0.1:{port}/ws"
            async with websockets.connect(ws_url) as first:
                await first.send('{"type":"reset"}')
                await first.recv()
                async with websockets.connect(ws_url) as second:  # the handshake succeeds
                    reply = json.loads(await asyncio.wait_for(second.recv(), 10))
                    with pytest.raises(websockets.ConnectionClosed):
                        await asyncio.wait_for(second.recv(), 10)
                    return reply, second.close_code

        reply, code = asyncio.run(go())
        assert reply["type"] == "error"
        assert reply["data"]["code"] == "CAPACITY_REACHED"
        assert (reply["data"]["active_sessions"], reply["data"]["max_sessions"]) == (1, 1)
        assert code == 1000
    finally:
        stop_server(proc)


def test_reference_bench_env(ref_python: Any) -> None:
    with reference_server(env="bench", max_concurrent_envs=8) as (_, url):
        replies, _ = _ws_exchange(
            url, ['{"type":"reset"}', '{"type":"step","data":{"wait":0.05}}'], replies=2
        )
    assert replies[1] == {
        "type": "observation",
        "data": {"observation": {"ok": True}, "reward": 1.0, "done": False},
    }
