"""The client as code written for the reference's client uses it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from openenv_runtime import EnvClient, State, StepResult, create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import free_port, running_server
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation
from tests.support.servers import active_sessions, wait_until

pytestmark = pytest.mark.timeout(60)


class Echo(EnvClient[EchoAction, EchoObservation, State]):
    pass


class HandWritten(EnvClient[EchoAction, EchoObservation, State]):
    """A client with the hooks most reference clients define."""

    def _step_payload(self, action: EchoAction) -> dict[str, Any]:
        return {"message": action.message.upper()}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[EchoObservation]:
        body = payload["observation"]
        obs = EchoObservation(echoed_message="parsed:" + body["echoed_message"])
        return StepResult(observation=obs, reward=payload.get("reward"), done=payload["done"])

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(episode_id="parsed", step_count=payload["step_count"])


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    app = create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        max_concurrent_envs=8,
        settings=ServerSettings(web_interface=False),
    )
    with running_server(app) as base:
        yield base


def test_plain_blocking_calls_without_sync_or_event_loop(url: str) -> None:
    env = Echo(base_url=url, connect_timeout_s=5, message_timeout_s=30, max_message_size_mb=1)
    assert (
        env.connect_timeout == 5 and env.message_timeout == 30 and env.max_message_bytes == 1 << 20
    )
    first = env.reset(seed=3)
    assert first.observation.echoed_message == "ready"
    result = env.step(EchoAction(message="Hello"))
    assert result.reward == pytest.approx(0.5) and result.metadata == {"step": 1}
    assert env.state().step_count == 1
    env.close()
    assert wait_until(lambda: active_sessions(url) == 0)


def test_with_block_new_session_and_disconnect(url: str) -> None:
    with Echo(base_url=url) as env:
        env.reset()
        other = env.new_session()
        other.reset()
        assert wait_until(lambda: active_sessions(url) == 2)
        other.step(EchoAction(message="a"))
        assert env.state().step_count == 0 and other.state().step_count == 1
        other.disconnect()
    assert wait_until(lambda: active_sessions(url) == 0)


def test_reference_client_hooks_are_honoured(url: str) -> None:
    with HandWritten(base_url=url) as env:
        env.reset()
        result = env.step(EchoAction(message="hi"))
        assert result.observation.echoed_message == "parsed:HI"  # payload and parse hooks both ran
        assert env.state().episode_id == "parsed"


def test_async_use_is_unchanged(url: str) -> None:
    async def main() -> float | None:
        async with Echo(base_url=url) as env:
            await env.reset()
            return (await env.step(EchoAction(message="abc"))).reward

    assert asyncio.run(main()) == pytest.approx(0.3)


def test_sync_wrapper_still_works(url: str) -> None:
    with Echo(base_url=url).sync() as env:
        env.reset()
        assert env.step(EchoAction(message="xy")).observation.echoed_message == "xy"


def test_connection_failure_is_a_connection_error() -> None:
    with pytest.raises(ConnectionError, match="cannot connect"):
        Echo(base_url=f"http://127.0.0.1:{free_port()}", connect_timeout_s=2).reset()
