"""verifiers:TASKSET targets through a real server running in verifiers' own virtualenv.

``verifiers`` 0.4.0 cannot share the suite's interpreter (tests/support/verifiers_venv.py),
so the server runs with that virtualenv's python and this process drives it with the
runtime's client. Every reward is compared with verifiers' own ``Task.score`` run in that
virtualenv on the same task and the same messages (tests/fixtures/verifiers_envs/vf_score.py).
The environments are the two in tests/fixtures/verifiers_envs: ``vf_arith`` (single-turn,
questions built in code) and ``vf_lookup`` (multi-turn, facts from a local file, a tool).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv_cli.collect.store import read_rows
from openenv_runtime import EnvClient
from openenv_runtime.adapters.verifiers import (
    VerifiersAction,
    VerifiersObservation,
    VerifiersState,
    VerifiersToolCall,
)
from openenv_runtime.client.mcp import MCPToolClient
from tests.support.optional import unavailable
from tests.support.servers import REPO, stop_process
from tests.support.verifiers_venv import (
    VerifiersVenvError,
    assistant_message,
    serve,
    server_env,
    verifiers_python,
    verifiers_scores,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


class VerifiersClient(EnvClient[VerifiersAction, VerifiersObservation, VerifiersState]):
    pass


@pytest.fixture(scope="module")
def vf_python() -> Path:
    try:
        return verifiers_python()
    except VerifiersVenvError as exc:
        unavailable(f"the verifiers virtualenv could not be built: {exc}")


@pytest.fixture(scope="module")
def arith(vf_python: Path) -> Iterator[str]:
    process, url = serve(vf_python, "verifiers:vf_arith?num_tasks=40&seed=3")
    try:
        yield url
    finally:
        stop_process(process)


@pytest.fixture(scope="module")
def lookup(vf_python: Path) -> Iterator[str]:
    process, url = serve(vf_python, "verifiers:vf_lookup?max_turns=3")
    try:
        yield url
    finally:
        stop_process(process)


def assistant(action: VerifiersAction) -> dict[str, Any]:
    return assistant_message(action.content, action.tool_calls)


def test_single_turn_rewards_equal_verifiers_own_scoring(vf_python: Path, arith: str) -> None:
    episodes: list[dict[str, Any]] = []
    rewards: list[dict[str, Any]] = []
    with VerifiersClient(base_url=arith).sync() as env:
        for index in range(40):
            first = env.reset(task_index=index).observation
            assert [m["role"] for m in first.messages] == ["system", "user"]
            assert first.tools == [] and first.task_index == index
            assert "answer" not in first.metadata  # the reference answer stays in the server
            a, b = map(int, re.findall(r"\d+", first.messages[1]["content"])[:2])
            for reply in (str(a + b), f"It is {a + b}.", str(a + b + 1)):
                if reply != str(a + b):
                    first = env.reset(task_index=index).observation
                action = VerifiersAction(content=reply)
                result = env.step(action)
                assert result.done and result.observation.stop_condition is None
                episodes.append(
                    {"task_index": index, "messages": [*first.messages, assistant(action)]}
                )
                rewards.append(
                    {
                        "reward": result.reward,
                        "rewards": result.observation.rewards,
                        "metrics": result.observation.metrics,
                    }
                )
    expected = verifiers_scores(vf_python, "vf_arith", {"num_tasks": 40, "seed": 3}, episodes)
    assert rewards == expected  # 120 episodes, 0 differences
    assert {round(r["reward"], 6) for r in rewards} == {1.0, 0.2, 0.0}  # both weighted parts


def test_tool_turns_are_steps_and_the_episode_ends_as_verifiers_ends_it(
    vf_python: Path, lookup: str
) -> None:
    episodes: list[dict[str, Any]] = []
    seen: list[dict[str, Any]] = []
    with VerifiersClient(base_url=lookup).sync() as env:
        size = 5
        for index in range(size):
            for plan in ("look_up_then_answer", "give_up", "loop"):
                start = env.reset(task_index=index).observation
                names = {t["function"]["name"] for t in start.tools}
                assert names == {"facts_lookup", "facts_keys"}
                messages = list(start.messages)
                key = start.metadata["name"]
                turn = 0
                while True:
                    turn += 1
                    call = VerifiersToolCall(
                        id=f"c{index}-{turn}", name="facts_lookup", arguments={"key": key}
                    )
                    if plan == "look_up_then_answer" and turn == 2:
                        action = VerifiersAction(content=messages[-1]["content"])
                    else:
                        text = "I give up" if plan == "give_up" else ""
                        action = VerifiersAction(content=text, tool_calls=[call])
                    result = env.step(action)
                    messages += [assistant(action), *result.observation.messages]
                    if result.done:
                        break
                    assert result.reward == 0.0
                    assert [m["role"] for m in result.observation.messages] == ["tool"]
                stop = result.observation.stop_condition
                assert (
                    stop
                    == {"look_up_then_answer": None, "give_up": "gave_up", "loop": "max_turns"}[
                        plan
                    ]
                )
                assert turn == {"look_up_then_answer": 2, "give_up": 1, "loop": 3}[plan]
                episodes.append({"task_index": index, "messages": messages, "stop_condition": stop})
                seen.append(
                    {
                        "reward": result.reward,
                        "rewards": result.observation.rewards,
                        "metrics": result.observation.metrics,
                    }
                )
    assert [s["reward"] for s in seen] == [1.0, 0.0, 0.0] * size
    assert [s["metrics"]["tool_calls"] for s in seen] == [1.0, 1.0, 3.0] * size
    assert seen == verifiers_scores(vf_python, "vf_lookup", {}, episodes)


def mcp_post(url: str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}})
    request = urllib.request.Request(
        f"{url}/mcp", body.encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        reply: dict[str, Any] = json.loads(answer.read())
    return reply


def test_the_tools_are_the_servers_mcp_tools(lookup: str) -> None:
    """tools/list and tools/call over the protocol's MCP messages, served from verifiers' own
    virtualenv (mcp 2.0.0, no FastMCP): the runtime's MCP face needs neither."""
    listed = mcp_post(lookup, "tools/list")["result"]["tools"]
    tools = {tool["name"]: tool for tool in listed}
    assert set(tools) == {"facts_lookup", "facts_keys"}
    assert tools["facts_lookup"]["description"] == "The value stored under key, or 'unknown'."
    assert tools["facts_lookup"]["inputSchema"]["properties"]["key"]["type"] == "string"
    assert tools["facts_lookup"]["inputSchema"]["required"] == ["key"]
    # A call without a session has no episode, whose tool servers the call would run in.
    refused = mcp_post(lookup, "tools/call", {"name": "facts_keys", "arguments": {}})
    assert "reset this session first" in refused["error"]["message"]

    client = MCPToolClient(base_url=lookup)
    client.use_production_mode = True  # JSON-RPC frames on the session's WebSocket
    with client.sync() as env:
        start = env.reset(task_index=0).observation
        key = start.metadata["name"]
        assert {tool.name for tool in env.list_tools()} == {"facts_lookup", "facts_keys"}
        value = env.call_tool("facts_lookup", key=key)
        assert value != "unknown" and env.call_tool("facts_lookup", key="nope") == "unknown"
        assert key in json.loads(env.call_tool("facts_keys"))
        # Not a step: the episode goes on, scored on the turns sent as steps.
        assert env.state().step_count == 0
        result = env.step({"content": value})
    assert result.done and result.reward == 1.0


def test_the_docs_page_block_plays_its_episode_as_written(lookup: str) -> None:
    page = (REPO / "docs" / "env-verifiers.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"^```python\n(.*?)^```", page, re.S | re.M)
    assert "http://127.0.0.1:8000" in block
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.replace("http://127.0.0.1:8000", lookup), "<docs>", "exec"), {})
    assert out.getvalue().splitlines() == [
        "What is the author of Hamlet? Use the facts_lookup tool, then reply with the value only.",
        "Shakespeare",
        "1.0 True {'correct': 1.0}",
    ]


def test_an_unknown_option_is_one_clear_error_before_the_server_starts(vf_python: Path) -> None:
    done = subprocess.run(
        [str(vf_python), "-m", "openenv_runtime.serve", "verifiers:vf_arith?colour=red"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **server_env()},
    )
    assert done.returncode != 0
    assert "has no option 'colour'" in done.stderr and "num_tasks" in done.stderr


def test_collect_serves_a_verifiers_target_from_the_virtualenv_holding_verifiers(
    vf_python: Path, tmp_path: Path
) -> None:
    """`openenv collect` starts family servers with its own interpreter, so it runs from the
    virtualenv that holds verifiers (its CLI is installed there too)."""
    out = tmp_path / "arith"
    done = subprocess.run(
        [
            *(str(vf_python), "-m", "openenv_cli", "collect", "verifiers:vf_arith?num_tasks=10"),
            *("--policy", "random", "-n", "20", "--max-turns", "4", "--format", "jsonl"),
            *("-o", str(out), "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, **server_env()},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    rows = list(read_rows(out))
    assert len(rows) == 20 and all(row["error"] == "" for row in rows)
    first = json.loads(rows[0]["observations"][0])
    assert first["messages"][1]["content"].startswith("What is")
    assert set(json.loads(rows[0]["actions"][0])) <= {"content", "tool_calls", "metadata"}
