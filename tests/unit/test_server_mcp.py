"""POST /mcp sessions: their MCP connection is held, bounded per client, reaped, never leaked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import httpx
import pytest
from fastmcp import FastMCP
from fastmcp.server.middleware import Middleware

from openenv_runtime import Observation, State, create_app
from openenv_runtime.mcp import MCPEnvironment
from openenv_runtime.server import ServerSettings

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class CountHandshakes(Middleware):
    def __init__(self) -> None:
        self.count = 0

    async def on_initialize(self, context: Any, call_next: Any) -> Any:
        self.count += 1
        return await call_next(context)


HANDSHAKES = CountHandshakes()
SERVER = FastMCP("counted", middleware=[HANDSHAKES])


@SERVER.tool
def add(a: int, b: int) -> int:
    return a + b


class Counted(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True
    held: ClassVar[list[Any]] = []

    def __init__(self) -> None:
        super().__init__(SERVER)

    @asynccontextmanager
    async def mcp_session(self) -> AsyncIterator[Any]:
        async with super().mcp_session() as client:
            Counted.held.append(client)
            yield client

    def reset(self, **kwargs: Any) -> Observation:
        return Observation()

    @property
    def state(self) -> State:
        return State()


class Unreachable(Counted):
    @asynccontextmanager
    async def mcp_session(self) -> AsyncIterator[Any]:
        raise ConnectionError("MCP server unreachable")
        yield


async def rpc(client: httpx.AsyncClient, method: str, **params: Any) -> dict[str, Any]:
    reply = await client.post("/mcp", json={"jsonrpc": "2.0", "method": method, "params": params})
    return reply.json()  # type: ignore[no-any-return]


def connect(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def test_a_session_keeps_one_mcp_connection_and_closes_it_when_closed() -> None:
    app = create_app(Counted, None, None, max_concurrent_envs=4)
    async with connect(app) as client:
        sid = (await rpc(client, "openenv/session/create"))["result"]["session_id"]
        before = HANDSHAKES.count
        for n in range(3):
            reply = await rpc(
                client, "tools/call", name="add", arguments={"a": n, "b": 1}, session_id=sid
            )
            assert reply["result"]["data"] == n + 1
        assert HANDSHAKES.count == before  # no new connection per call
        held = Counted.held[-1]
        assert held.is_connected()
        assert (await rpc(client, "openenv/session/close", session_id=sid))["result"]["closed"]
        assert not held.is_connected()


async def test_a_failing_mcp_connection_leaks_no_slot() -> None:
    app = create_app(Unreachable, None, None, max_concurrent_envs=1)
    async with connect(app) as client:
        reply = await rpc(client, "openenv/session/create")
        assert "unreachable" in reply["error"]["message"]
        assert app.state.openenv_sessions.active == 0


async def test_mcp_sessions_count_against_the_per_client_cap() -> None:
    app = create_app(
        Counted,
        None,
        None,
        max_concurrent_envs=4,
        settings=ServerSettings(max_sessions_per_client=1),
    )
    async with connect(app) as client:
        assert "result" in await rpc(client, "openenv/session/create")
        refused = await rpc(client, "openenv/session/create")
        assert "MAX_SESSIONS_PER_CLIENT" in refused["error"]["message"]
        assert app.state.openenv_sessions.active == 1


async def test_an_idle_mcp_session_is_reaped_with_its_connection() -> None:
    app = create_app(Counted, None, None, max_concurrent_envs=4)
    manager = app.state.openenv_sessions
    async with connect(app) as client:
        sid = (await rpc(client, "openenv/session/create"))["result"]["session_id"]
        held = Counted.held[-1]
        manager.idle_timeout = 0.0
        assert await manager.reap_idle() == 1
        assert manager.active == 0 and not held.is_connected()
        gone = await rpc(
            client, "tools/call", name="add", arguments={"a": 1, "b": 1}, session_id=sid
        )
        assert "Unknown session_id" in gone["error"]["message"]


async def test_an_abandoned_sessions_mcp_connection_is_still_closed() -> None:
    app = create_app(Counted, None, None, max_concurrent_envs=4)
    manager = app.state.openenv_sessions
    async with connect(app) as client:
        sid = (await rpc(client, "openenv/session/create"))["result"]["session_id"]
        held = Counted.held[-1]
        session = manager.sessions[sid]
        session.env = None  # what a step timeout does: the instance is left to its step
        await manager.release(session)
        for task in list(manager._closing):
            await task
        assert not held.is_connected()


@pytest.mark.parametrize("name", ["execute_code", "get_callables"])
async def test_no_route_runs_agent_code(name: str) -> None:
    """Code mode is the environment's to offer: neither name is a tool a client can call."""
    app = create_app(Counted, None, None, max_concurrent_envs=4)
    async with connect(app) as client:
        listed = (await rpc(client, "tools/list"))["result"]["tools"]
        assert name not in {tool["name"] for tool in listed}
        reply = await rpc(client, "tools/call", name=name, arguments={"code": "result = 1"})
        assert "Unknown tool" in reply["error"]["message"]
        sid = (await client.post("/reset", json={})).json()["session_id"]
        action = {"type": "call_tool", "tool_name": name, "arguments": {"code": "result = 1"}}
        stepped = (await client.post("/step", json={"session_id": sid, "action": action})).json()
        assert stepped["observation"]["error"]["error_type"] == "tool_not_found"
        assert stepped["observation"]["result"] is None
        await client.post("/close", json={"session_id": sid})


async def test_a_sessions_code_runs_count_against_its_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Code mode's per-client share needs to know whose session holds the instance."""
    from openenv_runtime.mcp import code_mode
    from openenv_runtime.mcp.code_slots import CodeSlots

    monkeypatch.setattr(code_mode, "slots", CodeSlots(4))
    monkeypatch.setenv("CODE_WAIT_TIMEOUT", "2.5")
    monkeypatch.setenv("CODE_SLOTS_PER_CLIENT", "1")
    app = create_app(Counted, None, None, max_concurrent_envs=4)
    assert (code_mode.slots.wait_s, code_mode.slots.per_client) == (2.5, 1)
    async with connect(app) as client:
        sid = (await rpc(client, "openenv/session/create"))["result"]["session_id"]
        env = app.state.openenv_sessions.sessions[sid].env
        assert env.code_client == "addr:127.0.0.1"


async def test_a_tool_answered_by_step_is_run_and_counted_by_the_step_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``tools/list`` and ``tools/call`` of an environment that answers tools in ``step()``
    go through ``stepping.Stepper.run``, like every other step, and count under mcp."""
    from openenv_runtime.server.metrics import STEP_LABELS
    from openenv_runtime.server.stepping import Stepper
    from tests.fixtures.step_tools import StepTools

    ran: list[str] = []
    run = Stepper.run

    def spy(self: Stepper, session: Any, data: Any) -> Any:
        ran.append(type(data).__name__)
        return run(self, session, data)

    monkeypatch.setattr(Stepper, "run", spy)
    app = create_app(StepTools, max_concurrent_envs=4)
    async with connect(app) as client:
        sid = (await rpc(client, "openenv/session/create"))["result"]["session_id"]
        listed = await rpc(client, "tools/list", session_id=sid)
        assert {tool["name"] for tool in listed["result"]["tools"]} == {"add", "nap"}
        added = await rpc(client, "tools/call", name="add", arguments={"a": 2, "b": 3})
        assert added["result"] == 5
    assert ran == ["ListToolsAction", "CallToolAction"]
    counted = dict(zip(STEP_LABELS, app.state.openenv_sessions.tally.steps, strict=True))
    assert counted.get(("mcp", "ok")) == 2


async def test_tool_steps_learn_their_placement_apart_from_the_classs_steps() -> None:
    """A plain step answering tools is placed as any step is (the pool first, inline once
    proven cheap), on a placement of its own: cheap tools leave the class's steps alone."""
    from openenv_runtime.server.running.step_placement import StepPlacement
    from tests.fixtures.step_tools import StepTools

    class Tools(StepTools):  # its own class: placements are learnt per class
        pass

    app = create_app(Tools, max_concurrent_envs=4)
    async with connect(app) as client:
        sid = (await rpc(client, "openenv/session/create"))["result"]["session_id"]
        for n in range(StepPlacement.TRIALS + StepPlacement.SLOW_TRIALS):
            reply = await rpc(
                client, "tools/call", name="add", arguments={"a": n, "b": 1}, session_id=sid
            )
            assert reply["result"] == n + 1
    adapter = app.state.openenv_sessions.runner.adapter_for(Tools())
    assert adapter.tool_placement.inline
    assert adapter.step_placement.trials == 0 and not adapter.step_placement.inline
