"""environment_factory: TRL's environment contract over our servers (plain and MCP)."""

from __future__ import annotations

import gc
import inspect
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv_runtime.rollouts import environment_factory
from openenv_runtime.testing import running_server
from tests.fixtures.guess import make_app
from tests.support.servers import REPO, active_sessions, wait_until


@pytest.fixture(scope="module")
def guess_url() -> Iterator[str]:
    with running_server(make_app()) as url:
        yield url


def _tools(cls: type) -> list[str]:
    """The methods TRL would offer as tools (public functions of the class)."""
    return [
        name
        for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


def test_step_tool_from_the_action_schema(guess_url: str) -> None:
    cls = environment_factory(guess_url)
    assert _tools(cls) == ["step"]
    env: Any = cls()
    signature = inspect.signature(env.step)
    assert list(signature.parameters) == ["guess", "note"]
    assert signature.parameters["guess"].annotation is int
    assert signature.parameters["note"].default == ""
    assert "Args:" in (env.step.__doc__ or "") and "guess:" in (env.step.__doc__ or "")
    first = env.reset(seed=3, prompt="ignored")
    assert "seed 3" in first
    assert env.step(guess=1) == '{"hint": "higher", "prompt": ""}'
    assert env.get_reward() == 0.0
    env.step(3)
    assert env.get_reward() == 1.0
    with pytest.raises(ValueError, match="over"):
        env.step(guess=4)
    env.reset(seed=4)  # a new episode on the same session
    assert env.get_reward() == 0.0


def test_schema_is_what_transformers_reads(guess_url: str) -> None:
    utils = pytest.importorskip("transformers.utils", reason="needs the train extra")
    schema = utils.get_json_schema(environment_factory(guess_url)().step)
    parameters = schema["function"]["parameters"]
    assert parameters["properties"]["guess"]["type"] == "integer"
    assert parameters["required"] == ["guess"]


def test_mcp_environment_exposes_its_tools() -> None:
    pytest.importorskip("fastmcp", reason="needs openenv-runtime[mcp]")
    from openenv_runtime import create_app
    from openenv_runtime.mcp.types import CallToolAction, CallToolObservation
    from tests.fixtures.mcp_echo import ToolEchoEnvironment

    app = create_app(ToolEchoEnvironment, CallToolAction, CallToolObservation)
    with running_server(app) as url:
        cls = environment_factory(url)
        assert sorted(_tools(cls)) == ["add", "echo"]
        env: Any = cls()
        env.reset()
        assert env.add(a=2, b=3) == "5"
        assert env.echo(message="hi") == "hi"
        assert inspect.signature(env.add).parameters["a"].annotation is int


SCRIPT = """
import sys
from openenv_runtime.rollouts import environment_factory

env = environment_factory(sys.argv[1])()  # a module global: finalized at interpreter shutdown
env.reset(seed=1)
env.step(guess=1)
print("played", flush=True)
"""


def test_a_script_using_the_factory_exits(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(REPO)) if p)
    with running_server(make_app()) as url:
        try:
            done = subprocess.run(
                [sys.executable, str(script), url],
                capture_output=True,
                text=True,
                timeout=60,  # a bounded wait: the script takes about a second
                env={**os.environ, "PYTHONPATH": path},
            )
        except subprocess.TimeoutExpired:
            pytest.fail("the script never exited (the factory's finalizer waited at shutdown)")
        assert done.returncode == 0, done.stderr
        assert "played" in done.stdout
        assert wait_until(lambda: active_sessions(url) == 0, timeout=15)


def test_a_dropped_instance_ends_its_session() -> None:
    with running_server(make_app()) as url:
        env: Any = environment_factory(url)()
        env.reset(seed=2)
        assert active_sessions(url) == 1
        del env
        gc.collect()
        assert wait_until(lambda: active_sessions(url) == 0, timeout=15)
