"""The step path stays readable: one step function, and no function of the WebSocket
endpoint, the inline frame path or POST /step above a cyclomatic complexity of 15."""

from __future__ import annotations

import ast
from pathlib import Path

import mccabe
import pytest

SERVER = Path(__file__).resolve().parents[2] / "runtime" / "openenv_runtime" / "server"
LIMIT = 15


@pytest.mark.parametrize(
    "module", ["ws/endpoint.py", "ws/inline_frames.py", "http/step.py", "stepping.py"]
)
def test_no_function_of_the_step_path_is_too_complex(module: str) -> None:
    source = (SERVER / module).read_text()
    visitor = mccabe.PathGraphingAstVisitor()
    visitor.preorder(ast.parse(source), visitor)
    too_complex = {
        g.entity: g.complexity() for g in visitor.graphs.values() if g.complexity() > LIMIT
    }
    assert not too_complex, too_complex


def test_every_way_in_runs_its_step_through_the_one_step_function() -> None:
    for module in ("ws/endpoint.py", "http/step.py", "mcp.py", "ws/vector.py"):
        source = (SERVER / module).read_text()
        assert ".steps.run(" in source or "steps.run(" in source, module
        assert "call_inline" not in source and "validate_action(data)" not in source, module
        assert "runner.step(" not in source and ".now(" not in source, module


class _Odd:
    """An environment whose ``async def step`` returns what the contract does not allow."""

    def reset(self) -> None: ...

    async def step(self, action: object) -> object:
        return {"not": "an observation"}

    @property
    def state(self) -> None: ...


def test_an_async_step_is_checked_and_counted_when_awaited_without_its_wrapper() -> None:
    """The step function awaits an ``async def step``'s own coroutine (``AsyncStep.pending``):
    its result is still checked, and the step counted."""
    import asyncio

    from openenv_runtime.models import Observation
    from openenv_runtime.server.metrics import (
        WS_DONE,
        WS_ERROR,
        WS_INVALID,
        WS_OK,
        WS_TIMEOUT,
        Tally,
    )
    from openenv_runtime.server.running.adapter import AsyncStep, ContractViolation, EnvRunner
    from openenv_runtime.server.stepping import Stepper, ToolCall

    runner = EnvRunner(_Odd, 1, Observation)
    tally = Tally()
    steps = Stepper(
        runner, lambda data: data, 4, tally, (WS_OK, WS_DONE, WS_INVALID, WS_ERROR, WS_TIMEOUT)
    )
    call = ToolCall(_Odd())
    running = steps.run(call, {})
    assert type(call.step) is AsyncStep and not isinstance(running, Observation)
    with pytest.raises(ContractViolation, match=r"_Odd\.step\(\) returned dict"):
        asyncio.run(running)  # type: ignore[arg-type]
    assert tally.steps[WS_ERROR] == 1
