"""Hung environment code never hangs the server: create, reset, step, state and tools are bounded."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import httpx
import pytest
from fastmcp import FastMCP
from websockets.sync.client import connect

from openenv_runtime import Environment, Observation, State, create_app
from openenv_runtime.mcp import MCPEnvironment
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import running_server
from tests.fixtures.echo import EchoAction, EchoObservation
from tests.support.servers import get_json, post_json, wait_until

pytestmark = pytest.mark.integration  # real servers on real sockets

RELEASE = threading.Event()  # set at the end of each test: every hung call returns
HANG_CREATE = threading.Event()


class Hanging(Environment[EchoAction, EchoObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        if HANG_CREATE.is_set():
            RELEASE.wait(30)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Any:
        return EchoObservation(echoed_message="ready")

    def step(self, action: EchoAction, **kw: Any) -> Any:
        if action.message == "hang":
            RELEASE.wait(30)
        return EchoObservation(echoed_message=action.message)

    @property
    def state(self) -> State:
        RELEASE.wait(30)  # a state() that never returns
        return State()


def ask(conn: Any, frame: dict[str, Any]) -> dict[str, Any]:
    conn.send(json.dumps(frame))
    return dict(json.loads(conn.recv(timeout=15)))


def test_a_hung_state_ends_its_session_and_frees_its_slot() -> None:
    RELEASE.clear()
    app = create_app(
        Hanging,
        EchoAction,
        EchoObservation,
        max_concurrent_envs=1,
        settings=ServerSettings(step_timeout=0.5),
    )
    try:
        with running_server(app) as url:
            with connect(url.replace("http", "ws") + "/ws") as conn:
                ask(conn, {"type": "reset"})
                reply = ask(conn, {"type": "state"})
                assert reply["data"]["code"] == "STEP_TIMEOUT"
            assert wait_until(lambda: get_json(url + "/health")[1]["active_sessions"] == 0)
            with connect(url.replace("http", "ws") + "/ws") as conn:  # the slot is free again
                assert ask(conn, {"type": "reset"})["type"] == "observation"
            _, opened = post_json(url + "/reset")
            status, _ = get_json(url + f"/state?session_id={opened['session_id']}")
            assert status == 504
    finally:
        RELEASE.set()


def test_a_hung_constructor_gets_a_clear_error_not_a_hang() -> None:
    RELEASE.clear()
    app = create_app(
        Hanging,
        EchoAction,
        EchoObservation,
        settings=ServerSettings(step_timeout=0.5, sync_pool_size=1),
    )
    try:
        with running_server(app) as url:
            HANG_CREATE.set()
            started = time.monotonic()
            with connect(url.replace("http", "ws") + "/ws") as conn:
                reply = json.loads(conn.recv(timeout=15))
            assert reply["data"]["code"] == "FACTORY_ERROR"
            assert "step timeout" in reply["data"]["message"]
            status, body = post_json(url + "/reset")
            assert status == 503 and "step timeout" in body["detail"]
            # past 4 x pool size stuck calls, new sessions are refused at once, saying why
            for _ in range(4):
                post_json(url + "/reset")
            status, body = post_json(url + "/reset")
            assert status == 503 and "stuck" in body["detail"], body
            assert time.monotonic() - started < 15
            # every new session is refused now: readiness says so (liveness does not)
            ready, body = get_json(url + "/ready")
            assert ready == 503 and body["status"] == "exhausted", body
            assert get_json(url + "/health")[0] == 200
            assert httpx.post(url + "/reset").headers["Retry-After"] == "1"
            HANG_CREATE.clear()
            RELEASE.set()  # the stuck constructors return; their instances are closed
            assert wait_until(lambda: get_json(url + "/health")[1]["stuck_threads"] == 0)
            assert get_json(url + "/ready")[0] == 200
            assert post_json(url + "/reset")[0] == 200
    finally:
        HANG_CREATE.clear()
        RELEASE.set()


TOOLS = FastMCP("slow")


@TOOLS.tool
async def sleepy() -> str:
    await asyncio.sleep(30)
    return "late"


class SlowTools(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__(TOOLS)

    def reset(self, **kw: Any) -> Observation:
        return Observation()

    @property
    def state(self) -> State:
        return State()


def test_tool_calls_obey_the_step_timeout() -> None:
    app = create_app(SlowTools, None, None, settings=ServerSettings(step_timeout=3))
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sleepy"}}
    with running_server(app) as url:
        started = time.monotonic()
        _, reply = post_json(url + "/mcp", call)  # on a short-lived instance
        assert "step timeout" in reply["error"]["message"]
        _, created = post_json(url + "/mcp", {**call, "method": "openenv/session/create"})
        assert "result" in created, created
        session = created["result"]["session_id"]
        _, reply = post_json(
            url + "/mcp", {**call, "params": {"name": "sleepy", "session_id": session}}
        )
        assert "step timeout" in reply["error"]["message"]
        assert time.monotonic() - started < 20
        assert wait_until(lambda: get_json(url + "/health")[1]["active_sessions"] == 0)
