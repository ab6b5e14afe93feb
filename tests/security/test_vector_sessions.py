"""Hostile clients of vector sessions (``X-OpenEnv-Vector``, server/ws/vector.py): a size out of
range, more environments than free slots, and batches that are malformed, too long, mistyped
or huge (close 1009, as any frame over the size limit) each get a clear error, hold no slot they were refused, and move no environment.

The server is a real one (``gymnasium:CartPole-v1``) with room for 6 sessions and vector
sessions of at most 4 environments.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosedError, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from openenv_runtime.testing import free_port
from tests.support.optional import require
from tests.support.servers import active_sessions, spawn_server, stop_process, wait_until

pytestmark = pytest.mark.integration  # a real server on a real socket

CAPACITY = 6
MAX_VECTOR = 4
MAX_BYTES = 4096


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    require("gymnasium")  # the server's environment family
    port = free_port()
    process = spawn_server(
        "gymnasium:CartPole-v1",
        port,
        env={
            "MAX_CONCURRENT_ENVS": str(CAPACITY),
            "OPENENV_MAX_VECTOR_ENVS": str(MAX_VECTOR),
            "OPENENV_MAX_MESSAGE_BYTES": str(MAX_BYTES),
        },
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(process)


def vector(url: str, n: str) -> ClientConnection:
    return connect(
        url.replace("http", "ws") + "/ws",
        additional_headers={"X-OpenEnv-Vector": n},
        open_timeout=60,
        max_size=None,
    )


def ask(conn: ClientConnection, message: Any) -> dict[str, Any]:
    conn.send(message if isinstance(message, str) else json.dumps(message))
    reply: dict[str, Any] = json.loads(conn.recv(timeout=60))
    return reply


def settled(url: str, expected: int) -> bool:
    return wait_until(lambda: active_sessions(url) == expected, timeout=30)


@pytest.mark.parametrize("n", ["0", str(MAX_VECTOR + 1), "-2", "four", "9" * 40])
def test_a_size_out_of_range_is_refused_before_the_upgrade(url: str, n: str) -> None:
    with pytest.raises(InvalidStatus) as refused:
        vector(url, n)
    response = refused.value.response
    assert response.status_code == 400
    assert response.headers["X-OpenEnv-Error"] == "VECTOR_INVALID"
    assert b"1 to 4" in response.body
    assert settled(url, 0)


def test_more_environments_than_free_slots_are_refused_whole(url: str) -> None:
    with vector(url, "4") as held:
        assert ask(held, {"type": "state"})["type"] == "states"
        assert active_sessions(url) == 4  # each environment counts as a session
        with pytest.raises(InvalidStatus) as refused:
            vector(url, "3")  # 2 slots free
        response = refused.value.response
        assert response.status_code == 503
        assert response.headers["X-OpenEnv-Error"] == "CAPACITY_REACHED"
        assert b"needs 3 free slots" in response.body
        assert active_sessions(url) == 4  # the refused one holds nothing
    assert settled(url, 0)


HOSTILE: list[tuple[str, Any, str]] = [
    ("too many actions", {"actions": [{"action": 0}] * 3}, "has 3 entries"),
    ("too few actions", {"actions": [{"action": 0}]}, "has 1 entries"),
    ("actions not a list", {"actions": {"0": {"action": 1}}}, "must be a list"),
    ("no data", None, "must be a list"),
    ("a wrong action type", {"actions": [{"action": "left"}, None]}, "actions[0]"),
    ("an action out of its space", {"actions": [None, {"action": 7}]}, "actions[1]"),
    (
        "extra action fields",
        {"actions": [{"action": 0, **{f"k{i}": i for i in range(50)}}, None]},
        "actions[0]",
    ),
    ("an unknown key", {"actions": [None, None], "bogus": 1}, "unknown keys"),
    ("a reset index out of range", {"actions": [None, None], "reset": [2]}, "distinct indices"),
    ("a repeated reset index", {"actions": [None, None], "reset": [0, 0]}, "distinct indices"),
    ("a reset index not an int", {"actions": [None, None], "reset": ["0"]}, "distinct indices"),
    ("reset_ended not a bool", {"actions": [None, None], "reset_ended": "yes"}, "true or false"),
]


@pytest.mark.parametrize(("case", "data", "said"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_malformed_step_batch_is_refused_whole_and_moves_nothing(
    url: str, case: str, data: Any, said: str
) -> None:
    with vector(url, "2") as conn:
        first = ask(conn, {"type": "reset", "data": {"envs": [{"seed": 1}, {"seed": 2}]}})
        before = [r["data"]["observation"]["observation"] for r in first["data"]["results"]]
        message: dict[str, Any] = {"type": "step"}
        if data is not None:
            message["data"] = data
        reply = ask(conn, message)
        assert reply["type"] == "error", case
        assert reply["data"]["code"] == "VALIDATION_ERROR"
        assert said in reply["data"]["message"]
        states = ask(conn, {"type": "state"})["data"]["states"]
        assert [s["data"]["step_count"] for s in states] == [0, 0]  # nothing stepped
        # the session goes on: the same seeds give the same first observations
        again = ask(conn, {"type": "reset", "data": {"envs": [{"seed": 1}, {"seed": 2}]}})
        assert [r["data"]["observation"]["observation"] for r in again["data"]["results"]] == before


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"envs": [{"seed": 1}]}, "has 1 entries"),
        ({"envs": [{"seed": 1}, 5]}, "envs[1] must be an object"),
        ({"envs": [None, None], "more": 1}, 'one key, "envs"'),
        ([1, 2], "must be a list"),
    ],
)
def test_a_malformed_reset_batch_is_refused(url: str, data: Any, said: str) -> None:
    with vector(url, "2") as conn:
        reply = ask(conn, {"type": "reset", "data": data})
        assert reply["type"] == "error"
        assert reply["data"]["code"] == "VALIDATION_ERROR"
        assert said in reply["data"]["message"]


def test_a_huge_batch_closes_with_1009_and_frees_every_slot(url: str) -> None:
    with vector(url, "2") as conn:
        pad = "x" * MAX_BYTES
        huge = json.dumps({"type": "step", "data": {"actions": [{"action": 0}] * 2, "pad": pad}})
        with pytest.raises(ConnectionClosedError) as closed:
            ask(conn, huge)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    assert settled(url, 0)


def test_other_messages_on_a_vector_session_are_unknown(url: str) -> None:
    with vector(url, "1") as conn:
        for kind in ("mcp", "checkpoint", "bogus"):
            reply = ask(conn, {"type": kind, "data": {}})
            assert reply["data"]["code"] == "UNKNOWN_TYPE"
            assert "vector session takes reset, step, state, close" in reply["data"]["message"]
        assert ask(conn, "[1, 2]")["data"]["code"] == "VALIDATION_ERROR"
        assert ask(conn, "{nope")["data"]["code"] == "INVALID_JSON"
