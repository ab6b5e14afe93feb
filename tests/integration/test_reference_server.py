"""Our server with the reference OpenEnv's options, routes and conventions."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, ClassVar
from uuid import uuid4

import pytest
from fastapi import FastAPI
from websockets.asyncio.client import connect

from openenv_runtime.compat import (
    CallToolAction,
    CallToolObservation,
    ConcurrencyConfig,
    Environment,
    EnvironmentMetadata,
    HTTPEnvServer,
    State,
    create_app,
)
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import running_server
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation
from tests.fixtures.mcp_echo import ToolEchoEnvironment
from tests.support.servers import get_json, post_json

pytestmark = pytest.mark.timeout(120)


def test_create_app_takes_every_reference_option() -> None:
    app = create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        "echo_env",
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=3, session_timeout=30),
        gradio_builder=lambda *a: None,
        custom_tab_name="Mine",
        custom_tab_primary=True,
        show_default_tab=False,
        title_override="Echo!",
        reset_observation_cls=EchoObservation,
        settings=ServerSettings(web_interface=False),
    )
    with running_server(app) as url:
        assert get_json(url + "/health")[1]["max_sessions"] == 3
        assert get_json(url + "/metadata")[1]["name"] == "echo_env"
        openapi = get_json(url + "/openapi.json")[1]
        assert openapi["info"]["version"] == "1.0.0"  # the protocol version their validate reads
        assert openapi["info"]["title"] == "Echo!"
        schema = get_json(url + "/schema")[1]
        assert schema["reset_observation"] == EchoObservation.model_json_schema()
    assert app.state.openenv_settings.values.session_timeout == 30


def test_both_capacity_options_is_an_error_as_in_the_reference() -> None:
    with pytest.raises(ValueError, match="both"):
        create_app(
            EchoEnvironment,
            EchoAction,
            EchoObservation,
            max_concurrent_envs=2,
            concurrency_config=ConcurrencyConfig(max_concurrent_envs=2),
        )


def test_production_mode_leaves_out_the_http_simulation_routes() -> None:
    app = create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        mode="production",
        settings=ServerSettings(web_interface=False),
    )
    with running_server(app) as url:
        assert post_json(url + "/reset", {})[0] == 404
        assert post_json(url + "/step", {"action": {"message": "x"}})[0] == 404
        assert (
            post_json(url + "/mcp", {"jsonrpc": "2.0", "method": "tools/list", "id": 1})[0] == 200
        )


def test_http_env_server_face_registers_routes_and_lifecycle() -> None:
    app = FastAPI()
    server = HTTPEnvServer(
        EchoEnvironment, EchoAction, EchoObservation, max_concurrent_envs=2, env_name="echo"
    )
    server.register_routes(app)
    with running_server(app) as url:
        status, body = post_json(url + "/reset", {})
        assert status == 200 and body["observation"]["echoed_message"] == "ready"
        assert server.active_sessions == 1 and server.get_capacity_status().available_slots == 1
    assert server.active_sessions == 0  # the app's shutdown closed the session


class Described(EchoEnvironment):
    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="described", description="told by the environment", version="9.9"
        )


def test_get_metadata_override_fills_metadata() -> None:
    with running_server(
        create_app(
            Described, EchoAction, EchoObservation, settings=ServerSettings(web_interface=False)
        )
    ) as url:
        meta = get_json(url + "/metadata")[1]
    assert (meta["name"], meta["description"], meta["version"]) == (
        "described",
        "told by the environment",
        "9.9",
    )


def test_session_id_query_parameter_is_honoured_by_every_http_route() -> None:
    with running_server(
        create_app(
            EchoEnvironment,
            EchoAction,
            EchoObservation,
            settings=ServerSettings(web_interface=False),
        )
    ) as url:
        status, body = post_json(url + "/step", {"action": {"message": "x"}})
        assert status == 400 and "POST /reset" in body["detail"]  # says how to open a session
        sid = post_json(url + "/reset", {})[1]["session_id"]
        status, body = post_json(f"{url}/step?session_id={sid}", {"action": {"message": "hey"}})
        assert status == 200 and body["observation"]["echoed_message"] == "hey"
        assert body["metadata"] == {"step": 1}  # also beside the observation
        assert get_json(f"{url}/state?session_id={sid}")[1]["step_count"] == 1
        assert post_json(f"{url}/close?session_id={sid}")[0] == 200
        assert get_json(url + "/health")[1]["active_sessions"] == 0


class Pinned(Environment[EchoAction, EchoObservation, State]):
    """Records the thread of every call: it must be the session's own, always the same."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    REQUIRES_SINGLE_THREAD_EXECUTOR = True
    threads: ClassVar[dict[str, set[int]]] = {}

    def __init__(self) -> None:
        self.key = str(uuid4())
        self._seen = Pinned.threads.setdefault(self.key, set())
        self._seen.add(threading.get_ident())
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kw: Any
    ) -> EchoObservation:
        self._seen.add(threading.get_ident())
        return EchoObservation(echoed_message=self.key)

    def step(self, action: EchoAction, **kw: Any) -> EchoObservation:
        self._seen.add(threading.get_ident())
        return EchoObservation(echoed_message=self.key)

    @property
    def state(self) -> State:
        self._seen.add(threading.get_ident())
        return self._state

    def close(self) -> None:
        self._seen.add(threading.get_ident())


def test_thread_affinity_every_call_of_a_session_on_its_own_thread() -> None:
    app = create_app(
        Pinned,
        EchoAction,
        EchoObservation,
        max_concurrent_envs=8,
        settings=ServerSettings(web_interface=False),
    )

    async def session(url: str) -> str:
        async with connect(url.replace("http", "ws") + "/ws") as ws:
            await ws.send(json.dumps({"type": "reset"}))
            key = json.loads(await ws.recv())["data"]["observation"]["echoed_message"]
            for _ in range(5):
                await ws.send(json.dumps({"type": "step", "data": {"message": "m"}}))
                await ws.recv()
                await ws.send(json.dumps({"type": "state"}))
                await ws.recv()
            return str(key)

    async def main(url: str) -> list[str]:
        return list(await asyncio.gather(*(session(url) for _ in range(8))))

    with running_server(app) as url:
        keys = asyncio.run(main(url))
    seen = [Pinned.threads[k] for k in keys]
    assert all(len(threads) == 1 for threads in seen), seen  # 8/8 sessions never hop
    assert len(set().union(*seen)) == 8  # and each has a thread of its own


def test_mcp_json_rpc_over_http_and_ws() -> None:
    app = create_app(
        ToolEchoEnvironment,
        CallToolAction,
        CallToolObservation,
        env_name="tools",
        settings=ServerSettings(web_interface=False),
    )
    with running_server(app) as url:
        rpc = lambda method, **params: post_json(  # noqa: E731
            url + "/mcp", {"jsonrpc": "2.0", "method": method, "params": params, "id": 7}
        )[1]
        assert rpc("tools/list")["result"]["tools"][0]["inputSchema"]["type"] == "object"
        assert rpc("tools/call", name="add", arguments={"a": 1, "b": 2})["result"]["data"] == 3
        assert rpc("nope")["error"]["code"] == -32601
        assert post_json(url + "/mcp", {"method": "x"})[1]["error"]["code"] == -32600
        sid = rpc("openenv/session/create")["result"]["session_id"]
        assert get_json(url + "/health")[1]["active_sessions"] == 1
        assert (
            rpc("tools/call", name="echo", arguments={"message": "s"}, session_id=sid)["result"][
                "data"
            ]
            == "s"
        )
        assert rpc("openenv/session/close", session_id=sid)["result"]["closed"] is True
        assert get_json(url + "/health")[1]["active_sessions"] == 0
        assert (
            rpc("tools/call", name="echo", arguments={}, session_id="missing")["error"]["code"]
            == -32602
        )

        async def ws_frames() -> tuple[dict[str, Any], dict[str, Any]]:
            async with connect(url.replace("http", "ws") + "/ws") as ws:
                await ws.send(
                    json.dumps(
                        {"type": "mcp", "data": {"jsonrpc": "2.0", "method": "tools/list", "id": 1}}
                    )
                )
                listed = json.loads(await ws.recv())
            async with connect(url.replace("http", "ws") + "/mcp") as ws:
                await ws.send(
                    json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "method": "tools/call",
                            "params": {"name": "add", "arguments": {"a": 2, "b": 2}},
                            "id": 2,
                        }
                    )
                )
                called = json.loads(await ws.recv())
            return listed, called

        listed, called = asyncio.run(ws_frames())
        assert listed["type"] == "mcp" and len(listed["data"]["result"]["tools"]) == 2
        assert called["result"]["data"] == 4


class CountingTools(ToolEchoEnvironment):
    """Counts steps like the reference's echo env, and has a simulation-only tool."""

    def __init__(self) -> None:
        super().__init__()
        self.mode = "simulation"

        @self.tool(mode="simulation")
        def weather(city: str) -> str:
            return f"sunny in {city}"

    async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        self._state.step_count += 1
        return await super().step_async(action, timeout_s=timeout_s, **kwargs)


def test_tool_calls_of_the_mcp_client_are_steps_of_the_episode() -> None:
    from openenv_runtime.compat import MCPToolClient

    app = create_app(
        CountingTools,
        CallToolAction,
        CallToolObservation,
        settings=ServerSettings(web_interface=False),
    )
    with running_server(app) as url, MCPToolClient(base_url=url).sync() as env:
        env.reset()
        assert {t.name for t in env.list_tools()} == {"echo", "add", "weather"}
        assert env.call_tool("add", a=2, b=3) == 5
        assert env.call_tool("weather", city="Oslo") == "sunny in Oslo"
        assert env.state().step_count == 3  # list_tools and both calls went through step
        with pytest.raises(RuntimeError, match="nope"):
            env.call_tool("nope")
        rpc = post_json(
            url + "/mcp",
            {
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {"name": "weather", "arguments": {"city": "Rome"}},
                "id": 1,
            },
        )[1]
        assert rpc["result"]["data"] == "sunny in Rome"  # mode tools over JSON-RPC too


def test_plain_environment_answers_tools_list_with_a_json_rpc_error() -> None:
    with running_server(
        create_app(
            EchoEnvironment,
            EchoAction,
            EchoObservation,
            settings=ServerSettings(web_interface=False),
        )
    ) as url:
        reply = post_json(url + "/mcp", {"jsonrpc": "2.0", "method": "tools/list", "id": 1})[1]
    assert reply["error"]["code"] == -32603 and "no MCP tools" in reply["error"]["message"]


class Tasks(EchoEnvironment):
    TASKS: ClassVar[dict[str, list[Any]]] = {
        "train": [{"id": i} for i in range(5)],
        "test": [{"id": 100}],
    }

    def list_splits(self) -> list[Any]:
        return ["train", {"name": "test", "type": "test"}]

    async def list_tasks(self, split: str) -> list[Any]:
        return self.TASKS[split]

    def num_tasks(self, split: str) -> int:
        return len(self.TASKS[split])

    def get_task(self, split: str, index: int) -> Any:
        return self.TASKS[split][index]


def test_task_api_routes() -> None:
    app = create_app(
        Tasks,
        EchoAction,
        EchoObservation,
        env_name="tasks_env",
        settings=ServerSettings(web_interface=False),
    )
    with running_server(app) as url:
        assert get_json(url + "/list_environments")[1] == ["tasks_env"]
        assert get_json(url + "/tasks_env/splits")[1] == [
            {"name": "train", "type": "train"},
            {"name": "test", "type": "test"},
        ]
        assert post_json(url + "/tasks_env/num_tasks", {"split": "train"})[1] == {"num_tasks": 5}
        assert post_json(url + "/tasks_env/tasks", {"split": "test"})[1]["tasks"] == [{"id": 100}]
        assert post_json(url + "/tasks_env/task", {"split": "train", "index": 2})[1] == {
            "task": {"id": 2}
        }
        assert post_json(url + "/tasks_env/task", {"split": "train", "index": 99})[0] == 400
        assert post_json(url + "/tasks_env/task_range", {"split": "train"})[0] == 501
        assert get_json(url + "/other/splits")[0] == 404
