"""MCPEnvironment: tools per mode (production / simulation) and code mode (execute_code)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from fastmcp import FastMCP

from openenv_runtime import Observation, State
from openenv_runtime.mcp import CallToolAction, CallToolObservation, ListToolsAction, MCPEnvironment


class Tools(MCPEnvironment):
    def __init__(self) -> None:
        server = FastMCP("tools")

        @server.tool
        def add(a: int, b: int) -> int:
            return a + b

        super().__init__(server)

        @self.tool(mode="production")
        def lookup(query: str) -> str:
            return f"real:{query}"

        @self.tool(mode="simulation")
        def lookup(query: str) -> str:  # noqa: F811
            return f"mock:{query}"

        @self.tool(mode="simulation")
        async def sim_only(x: int) -> int:
            await asyncio.sleep(0)
            return x * 10

        @self.tool()
        def everywhere(x: int) -> int:
            return x + 1

    def reset(self, **kwargs: Any) -> Observation:
        return Observation()

    @property
    def state(self) -> State:
        return State()


def names(env: MCPEnvironment) -> set[str]:
    return {t.name for t in env.step(ListToolsAction()).tools}  # type: ignore[attr-defined]


def value(obs: Any) -> Any:
    assert isinstance(obs, CallToolObservation) and obs.error is None, obs
    return obs.result.data


def test_each_mode_lists_and_calls_its_own_tools() -> None:
    env = Tools()
    assert env.mode is None and names(env) == {"add", "everywhere"}
    env.mode = "production"
    assert names(env) == {"add", "everywhere", "lookup"}
    assert value(env.step(CallToolAction(tool_name="lookup", arguments={"query": "q"}))) == "real:q"
    env.mode = "simulation"
    assert names(env) == {"add", "everywhere", "lookup", "sim_only"}
    assert value(env.step(CallToolAction(tool_name="lookup", arguments={"query": "q"}))) == "mock:q"
    assert value(env.step(CallToolAction(tool_name="sim_only", arguments={"x": 2}))) == 20
    assert value(env.step(CallToolAction(tool_name="everywhere", arguments={"x": 2}))) == 3


def test_a_tool_of_another_mode_is_not_found() -> None:
    env = Tools()
    env.mode = "production"
    obs = env.step(CallToolAction(tool_name="sim_only", arguments={"x": 1}))
    assert isinstance(obs, CallToolObservation) and obs.error is not None
    assert obs.error.error_type.value == "tool_not_found" and "production" in obs.error.message


def test_bad_modes_and_reserved_names_are_refused() -> None:
    env = Tools()
    with pytest.raises(ValueError, match="Invalid mode"):
        env.tool(mode="staging")
    with pytest.raises(ValueError, match="Invalid mode"):
        env.mode = "staging"
    with pytest.raises(ValueError, match="reserved"):

        @env.tool(mode="simulation")
        def reset() -> None: ...


def test_code_mode_calls_the_current_modes_tools() -> None:
    env = Tools()
    env.mode = "simulation"
    assert env.supports_code_mode and set(env.get_callables()) == {
        "add",
        "everywhere",
        "lookup",
        "sim_only",
    }
    obs = env.execute_code(
        "total = 0\nfor n in [1, 2, 3]:\n    total = add(a=total, b=n)\nresult = total"
    )
    assert obs.metadata == {"result": 6}
    assert env.execute_code("result = lookup(query='x')").metadata["result"] == "mock:x"
    printed = env.execute_code("print('hi')\nresult = 1").metadata
    assert printed["result"] == 1 and "hi" in printed["stdout"]


@pytest.mark.parametrize(
    ("code", "says"),
    [
        ("result = add(a=1, b=", "Syntax error"),
        ("result = add(a=1, b='x')", "unsupported operand"),
        ("result = missing(x=1)", "missing"),
        ("import os\nresult = os.listdir('/')", "Import of os is not allowed"),
        ("result = open('/etc/passwd').read()", "open"),
        ("result = ().__class__.__bases__[0].__subclasses__()", "dunder"),
        ("__import__('os').system('true')", "__import__"),
    ],
)
def test_code_mode_refuses_what_an_agent_must_not_do(code: str, says: str) -> None:
    # each of these runs with exec(); the restricted interpreter answers an error instead
    metadata = Tools().execute_code(code).metadata
    assert "result" not in metadata and says in metadata["error"], metadata


def _code_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "openenv-code-mode"]


@pytest.mark.parametrize(
    "code",
    [
        "for i in range(1000):\n    nap()",  # each call sleeps: only the caller's deadline stops it
        "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass",
    ],
)
def test_code_mode_is_bounded_in_time_and_the_run_stops(code: str) -> None:
    env = Tools()

    @env.tool()
    def nap() -> int:
        time.sleep(0.05)
        return 1

    metadata = env.execute_code(code, timeout_s=0.5).metadata
    assert "took over 0.5 s" in metadata["error"], metadata
    for thread in _code_threads():  # the runaway code was stopped, not left running
        thread.join(10)
    assert not _code_threads()


def test_code_mode_output_is_bounded() -> None:
    from openenv_runtime.mcp.code_mode import MAX_PRINT_CHARS

    metadata = Tools().execute_code("print('a' * 200000)\nresult = 1").metadata
    assert metadata["result"] == 1 and len(metadata["stdout"]) == MAX_PRINT_CHARS
    endless = Tools().execute_code("while True:\n    print('a' * 1000)").metadata
    assert "printed over" in endless["error"] and len(endless["stdout"]) == MAX_PRINT_CHARS


def test_code_mode_result_is_bounded() -> None:
    from openenv_runtime.mcp.code_mode import MAX_RESULT_CHARS

    metadata = Tools().execute_code(f"result = 'a' * {MAX_RESULT_CHARS + 1}").metadata
    assert "result" not in metadata and f"at most {MAX_RESULT_CHARS}" in metadata["error"]


def test_code_mode_ends_on_time_while_a_tool_hangs() -> None:
    env = Tools()
    release = threading.Event()

    @env.tool()
    def hang() -> int:
        release.wait(60)
        return 1

    try:
        metadata = env.execute_code("result = hang()", timeout_s=0.5).metadata
    finally:
        release.set()
    assert "took over 0.5 s" in metadata["error"], metadata


def test_an_async_tool_runs_on_the_tool_calls_thread() -> None:
    # blocking.run_to_completion on the call's own thread: no second thread per call
    env = Tools()
    seen: list[threading.Thread] = []

    async def body() -> int:
        seen.append(threading.current_thread())
        await asyncio.sleep(0)
        return 1

    @env.tool()
    def where() -> Any:
        seen.append(threading.current_thread())
        return body()

    assert env.execute_code("result = where()").metadata["result"] == 1
    assert len(seen) == 2 and seen[0] is seen[1]
