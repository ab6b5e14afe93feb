"""MCP tools on a real server: a slow tool answered by ``step()`` does not hold up other sessions."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
from websockets.asyncio.client import connect

from openenv_runtime.server.running.step_placement import StepPlacement
from openenv_runtime.testing import free_port
from tests.support.servers import server_process

WAIT = 30.0  # bounded waits only: never a timing assertion


def test_a_slow_tool_leaves_other_sessions_steps_answered(tmp_path: Path) -> None:
    """The tool sleeps 0.5 s in one session; another session's steps, of the same class and
    proven cheap (inline on the event loop), are answered meanwhile: the tool's step is placed
    apart from them, on the thread pool."""
    marker = tmp_path / "napping"
    port = free_port()
    with server_process("tests.fixtures.step_tools:app", port, STEP_TOOLS_MARKER=str(marker)):
        asyncio.run(_slow_tool_and_fast_steps(port, marker))


async def _slow_tool_and_fast_steps(port: int, marker: Path) -> None:
    async with (
        connect(f"ws://127.0.0.1:{port}/ws") as fast,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http,
    ):
        await fast.send(json.dumps({"type": "reset", "data": {}}))
        await fast.recv()
        step = json.dumps({"type": "step", "data": {}})
        for _ in range(StepPlacement.TRIALS + StepPlacement.SLOW_TRIALS):
            await fast.send(step)  # the class's steps are then proven cheap: inline
            assert json.loads(await fast.recv())["data"]["reward"] == 1.0

        created = await http.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create"}
        )
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "nap",
                "arguments": {},
                "session_id": created.json()["result"]["session_id"],
            },
        }
        napping = asyncio.ensure_future(http.post("/mcp", json=call))
        for _ in range(int(WAIT / 0.01)):
            if marker.exists() or napping.done():
                break
            await asyncio.sleep(0.01)
        assert marker.exists(), "the tool did not start"

        for _ in range(2):  # answered while the tool sleeps, not after it
            await fast.send(step)
            answer = asyncio.ensure_future(fast.recv())
            await asyncio.wait({answer, napping}, timeout=WAIT, return_when="FIRST_COMPLETED")
            assert answer.done() and not napping.done(), "a step waited for the slow tool"
            assert json.loads(answer.result())["data"]["reward"] == 1.0
        rested = (await asyncio.wait_for(napping, WAIT)).json()
        assert rested["result"] == "rested"
