"""The client against a real server: async, sync (also inside a running loop), generic, errors."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import model_validator

from openenv_runtime import Action, EnvClient, EnvError, GenericEnvClient, State, create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import running_server
from tests.fixtures.echo import AsyncEchoEnvironment, EchoAction, EchoEnvironment, EchoObservation


class Echo(EnvClient[EchoAction, EchoObservation, State]):
    pass


@pytest.fixture(
    scope="module", params=[EchoEnvironment, AsyncEchoEnvironment], ids=["sync-env", "async-env"]
)
def server(request: pytest.FixtureRequest) -> Iterator[str]:
    app = create_app(
        request.param,
        EchoAction,
        EchoObservation,
        max_concurrent_envs=4,
        settings=ServerSettings(web_interface=False),
    )
    with running_server(app) as url:
        yield url


def test_async_episode(server: str) -> None:
    async def episode() -> None:
        async with Echo(base_url=server) as env:
            first = await env.reset(seed=1, episode_id="a1")
            assert first.observation.echoed_message == "ready" and first.done is False
            result = await env.step(EchoAction(message="Hello"))
            assert isinstance(result.observation, EchoObservation)
            assert result.reward == pytest.approx(0.5) and result.observation.message_length == 5
            state = await env.state()
            assert isinstance(state, State) and state.step_count == 1 and state.episode_id == "a1"

    asyncio.run(episode())


def test_sync_episode(server: str) -> None:
    with Echo(base_url=server).sync() as env:
        env.reset()
        assert env.step({"message": "abc"}).reward == pytest.approx(0.3)
        assert env.state().step_count == 1


def test_the_schema_is_read_by_the_client_without_a_session(server: str) -> None:
    async def read() -> dict[str, object]:
        return await Echo(base_url=server.replace("http://", "ws://") + "/ws").schema()

    schema = asyncio.run(read())
    assert schema["action"] == EchoAction.model_json_schema()
    with Echo(base_url=server).sync() as env:
        assert env.schema()["observation"] == EchoObservation.model_json_schema()
    assert Echo(base_url=server).schema()["state"]  # a plain call blocks, like reset()


def test_sync_client_inside_a_running_event_loop(server: str) -> None:
    async def inside() -> float | None:
        with Echo(base_url=server).sync() as env:  # blocking call from a loop's own thread
            env.reset()
            return env.step(EchoAction(message="xy")).reward

    assert asyncio.run(inside()) == pytest.approx(0.2)


def test_sessions_of_one_process_are_independent(server: str) -> None:
    async def run() -> list[int]:
        async def one(n: int) -> int:
            async with Echo(base_url=server) as env:
                await env.reset()
                for _ in range(n):
                    await env.step(EchoAction(message="x"))
                return (await env.state()).step_count

        return list(await asyncio.gather(*(one(n) for n in (1, 2, 3))))

    assert asyncio.run(run()) == [1, 2, 3]


def test_generic_client_uses_dicts(server: str) -> None:
    with GenericEnvClient(server).sync() as env:
        env.reset()
        result = env.step({"message": "hey"})
        assert result.observation["echoed_message"] == "hey" and result.reward == pytest.approx(0.3)
        assert env.state()["step_count"] == 1
        with pytest.raises(EnvError) as info:
            env.step({"message": "x", "nope": 1})
        assert info.value.code == "VALIDATION_ERROR" and info.value.details["errors"]


def test_server_errors_raise_env_error_with_code() -> None:
    app = create_app(
        EchoEnvironment, EchoAction, EchoObservation, settings=ServerSettings(web_interface=False)
    )
    with running_server(app) as url, Echo(url).sync() as env:
        env.reset()
        with pytest.raises(EnvError) as info:
            env.step(EchoAction(message="boom"))
        assert info.value.code == "EXECUTION_ERROR" and "exploded" in info.value.message
        assert env.step(EchoAction(message="fine")).observation.echoed_message == "fine"


def test_capacity_error_reaches_the_client() -> None:
    app = create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        max_concurrent_envs=1,
        settings=ServerSettings(web_interface=False),
    )
    with running_server(app) as url, Echo(url).sync() as holder:
        holder.reset()
        with pytest.raises(EnvError) as info:
            Echo(url).sync().reset()
        assert info.value.code == "CAPACITY_REACHED" and info.value.details["max_sessions"] == 1


def test_connection_failure_names_the_url() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(EnvError) as info:
        Echo(f"http://127.0.0.1:{port}", connect_timeout=2).sync().reset()
    assert (
        info.value.code == "CONNECTION_ERROR" and f"ws://127.0.0.1:{port}/ws" in info.value.message
    )


def test_message_timeout() -> None:
    app = create_app(
        AsyncEchoEnvironment,
        EchoAction,
        EchoObservation,
        settings=ServerSettings(web_interface=False),
    )
    with running_server(app) as url, Echo(url, message_timeout=0.2).sync() as env:
        with pytest.raises(EnvError) as info:
            env.step(EchoAction(message="slow", wait=2.0))
        assert info.value.code == "TIMEOUT"
        with pytest.raises(EnvError, match="connect"):  # the session is over, and says how to go on
            env.state()
        env.connect()
        assert env.reset().observation.echoed_message == "ready"


def test_an_app_can_be_served_again_after_its_server_stopped() -> None:
    app = create_app(
        EchoEnvironment, EchoAction, EchoObservation, settings=ServerSettings(web_interface=False)
    )
    for _ in range(2):
        with running_server(app) as url, Echo(url).sync() as env:
            assert env.step(EchoAction(message="again")).observation.echoed_message == "again"


class SeesDone(EchoObservation):
    """Its validator must see the reply's ``done``: the client reads it the general way."""

    @model_validator(mode="after")
    def _mark(self) -> SeesDone:
        self.metadata["done_seen"] = self.done
        return self


class EchoSeeingDone(EnvClient[EchoAction, SeesDone, State]):
    pass


class Unknown(Action):
    bogus: int = 1


class EchoWrongAction(EnvClient[Unknown, EchoObservation, State]):
    pass


def test_a_step_reads_the_same_in_one_pass_as_the_general_way(server: str) -> None:
    async def episode(env: EnvClient[Any, Any, Any]) -> list[tuple[Any, ...]]:
        async with env:
            await env.reset()
            results = [await env.step(EchoAction(message="x" * n)) for n in range(1, 4)]
        return [
            (
                r.observation.model_dump(),
                r.observation.model_fields_set,
                r.reward,
                type(r.reward),
                r.done,
                r.metadata,
            )
            for r in results
        ]

    one_pass = asyncio.run(episode(Echo(server)))
    general = asyncio.run(episode(Echo(server, resume=False)))  # no one-pass step
    assert one_pass == general
    seeing = asyncio.run(episode(EchoSeeingDone(server)))
    assert [row[0]["metadata"]["done_seen"] for row in seeing] == [row[4] for row in one_pass]


def test_an_error_reply_to_a_step_raises_its_code(server: str) -> None:
    async def bad_step() -> None:
        async with EchoWrongAction(server) as env:
            await env.reset()
            await env.step(Unknown())

    with pytest.raises(EnvError) as caught:
        asyncio.run(bad_step())
    assert caught.value.code == "VALIDATION_ERROR"
