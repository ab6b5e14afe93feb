"""openenv 0.10.0's clients against our server, and ours against its server, on real sockets.

The reference runs in its own virtualenv (``tests/support/reference.py``); neither side is
changed for the other. Covered: ``MCPToolClient`` (tools over the session), a typed
client written the way the reference's template writes them (``_step_payload`` /
``_parse_result`` / ``_parse_state``, plain blocking calls), ``GenericEnvClient`` with
``GenericAction``, and ``AutoEnv``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_runtime.compat import (
    Action,
    CallToolAction,
    CallToolObservation,
    EnvClient,
    GenericAction,
    GenericEnvClient,
    MCPToolClient,
    Observation,
    State,
    create_app,
)
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import running_server
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation
from tests.fixtures.mcp_echo import ToolEchoEnvironment
from tests.support.reference import (
    SCRIPTS_DIR,
    free_port,
    openenv_python,
    stop_server,
    wait_until_healthy,
)

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def ref_python() -> Path:
    return openenv_python()  # built once (a few minutes the first time), then cached


@pytest.fixture(scope="module")
def ours(ref_python: Path) -> Iterator[tuple[str, str]]:
    tools = create_app(
        ToolEchoEnvironment,
        CallToolAction,
        CallToolObservation,
        env_name="tool_echo",
        max_concurrent_envs=8,
        settings=ServerSettings(web_interface=False),
    )
    plain = create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        env_name="plain",
        max_concurrent_envs=8,
        settings=ServerSettings(web_interface=False),
    )
    with running_server(tools) as tools_url, running_server(plain) as plain_url:
        yield tools_url, plain_url


@contextlib.contextmanager
def _reference_server(python: Path, kind: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [str(python), str(SCRIPTS_DIR / "ref10_server.py"), "--port", str(port), "--kind", kind],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=dict(os.environ, ENABLE_WEB_INTERFACE="false"),
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_healthy(url, proc, timeout=90)
        yield url
    finally:
        stop_server(proc)


@pytest.fixture(scope="module")
def theirs(ref_python: Path) -> Iterator[tuple[str, str]]:
    with (
        _reference_server(ref_python, "mcp") as tools_url,
        _reference_server(ref_python, "plain") as plain_url,
    ):
        yield tools_url, plain_url


def test_reference_clients_against_our_server(ref_python: Path, ours: tuple[str, str]) -> None:
    tools_url, plain_url = ours
    result = subprocess.run(
        [
            str(ref_python),
            str(SCRIPTS_DIR / "ref10_clients.py"),
            "--mcp",
            tools_url,
            "--plain",
            plain_url,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    out = json.loads(result.stdout)
    assert out["mcp_tools"] == ["add", "echo"]
    assert out["mcp_echo"] == "hi" and out["mcp_add"] == 5
    assert out["generic"]["observation"]["echoed_message"] == "Hello"
    assert out["generic"]["reward"] == pytest.approx(0.5)
    # their typed client reads StepResult.metadata from the envelope, which ours now fills
    assert out["typed"]["echoed"] == "abc" and out["typed"]["reward"] == pytest.approx(0.3)
    assert out["typed"]["metadata"] == {"step": 1} and out["typed"]["step_count"] == 1
    assert out["auto"]["type"] == "GenericEnvClient" and out["auto"]["reward"] == pytest.approx(0.4)


class PlainAction(Action):
    message: str


class PlainObservation(Observation):
    echoed_message: str = ""
    message_length: int = 0


class Plain(EnvClient[PlainAction, PlainObservation, State]):
    pass


def test_our_mcp_tool_client_against_their_server(theirs: tuple[str, str]) -> None:
    tools_url, _ = theirs
    with MCPToolClient(base_url=tools_url) as env:  # plain blocking calls
        env.reset()
        assert sorted(t.name for t in env.list_tools()) == ["add", "echo"]
        assert env.call_tool("echo", message="hi") == "hi"
        assert env.call_tool("add", a=2, b=40) == 42
        result = env.step(CallToolAction(tool_name="echo", arguments={"message": "step"}))
        assert isinstance(result.observation, CallToolObservation)
        assert result.observation.result["data"] == "step"


def test_our_typed_client_blocking_against_their_server(theirs: tuple[str, str]) -> None:
    _, plain_url = theirs
    env = Plain(base_url=plain_url, message_timeout_s=30, connect_timeout_s=10)
    try:
        first = env.reset()  # no .sync(), no event loop
        assert first.observation.echoed_message == "ready"
        result = env.step(PlainAction(message="Hello"))
        assert result.observation.echoed_message == "Hello"
        assert result.reward == pytest.approx(0.5) and result.metadata == {"step": 1}
        assert env.state().step_count == 1
    finally:
        env.close()


def test_our_generic_client_against_their_server(theirs: tuple[str, str]) -> None:
    _, plain_url = theirs
    with GenericEnvClient(plain_url) as env:
        env.reset()
        result = env.step(GenericAction(message="hey"))
        assert result.observation["echoed_message"] == "hey"
        assert result.reward == pytest.approx(0.3)
