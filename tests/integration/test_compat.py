"""Wire compatibility with openenv-core, proven both ways on real sockets.

An openenv-core client (in its own virtualenv) runs an episode against our server, and our
client runs one against an openenv-core server. Neither side is changed for the other.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator

import pytest

from openenv_runtime import (
    Action,
    EnvClient,
    EnvError,
    GenericEnvClient,
    Observation,
    State,
    create_app,
)
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import running_server
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation
from tests.support.reference import reference_python, reference_server, run_reference_client
from tests.support.servers import active_sessions, wait_until

pytestmark = pytest.mark.timeout(900)


class RefEchoAction(Action):
    """Exactly the reference echo server's action."""

    message: str


class RefEchoObservation(Observation):
    echoed_message: str
    message_length: int


class RefEcho(EnvClient[RefEchoAction, RefEchoObservation, State]):
    pass


@pytest.fixture(scope="module")
def ours() -> Iterator[str]:
    reference_python()  # build the reference virtualenv once, outside the per-test time
    app = create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        max_concurrent_envs=8,
        settings=ServerSettings(web_interface=False),
    )
    with running_server(app) as url:
        yield url


@pytest.fixture(scope="module")
def theirs() -> Iterator[str]:
    reference_python()
    with reference_server(env="echo", max_concurrent_envs=4) as (_, url):
        yield url


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_reference_client_against_our_server(ours: str, mode: str) -> None:
    out = run_reference_client(ours, mode=mode)
    assert out["reset"]["observation"]["echoed_message"] == "ready"
    assert out["reset"]["reward"] == 0.0 and out["reset"]["done"] is False
    hello, abc = out["steps"]
    assert (hello["observation"]["echoed_message"], hello["observation"]["message_length"]) == (
        "Hello",
        5,
    )
    assert hello["reward"] == pytest.approx(0.5) and abc["reward"] == pytest.approx(0.3)
    for step in (out["reset"], hello, abc):
        # reward/done in the envelope; a non-empty metadata also beside the observation (0.10.0)
        expected = {"observation", "reward", "done"} | (
            {"metadata"} if step["raw"]["observation"].get("metadata") else set()
        )
        assert set(step["raw"]) == expected
    # unlike the reference server, ours sends Observation.metadata, and their client reads it
    assert hello["metadata_on_wire"] is True and hello["metadata"] == {"step": 1}
    assert out["state"]["step_count"] == 2 and isinstance(out["state"]["episode_id"], str)
    # their client turns our error reply into the RuntimeError it always raises
    assert out["error"]["type"] == "RuntimeError"
    assert out["error"]["message"].endswith("(code: VALIDATION_ERROR)")
    assert out["after_error"]["observation"]["echoed_message"] == "after"
    assert out["closed"] is True and out["close"]["code"] == 1000
    assert wait_until(lambda: active_sessions(ours) == 0)


def test_reference_validator_accepts_our_server(ours: str) -> None:
    openenv = reference_python().parent / "openenv"
    result = subprocess.run(
        [str(openenv), "validate", "--url", ours], capture_output=True, text=True, timeout=120
    )
    report = json.loads(result.stdout[result.stdout.index("{") :])
    failed = [c for c in report["criteria"] if not c.get("passed")]
    assert report["passed"] is True, failed


@pytest.mark.filterwarnings(
    "ignore:Pydantic serializer warnings"
)  # the invalid action is deliberate
def test_our_client_against_reference_server(theirs: str) -> None:
    async def episode() -> None:
        async with RefEcho(base_url=theirs) as env:
            first = await env.reset(episode_id="ours-1")
            assert (
                first.observation.echoed_message == "ready"
                and first.reward == 0.0
                and first.done is False
            )
            result = await env.step(RefEchoAction(message="Hello"))
            assert isinstance(result.observation, RefEchoObservation)
            assert result.observation.message_length == 5 and result.reward == pytest.approx(0.5)
            state = await env.state()
            assert state.step_count == 1 and state.episode_id == "ours-1"
            with pytest.raises(
                EnvError
            ) as info:  # built without validation, so only the server can refuse it
                await env.step(RefEchoAction.model_construct(message=12345))
            assert info.value.code == "VALIDATION_ERROR" and info.value.details["errors"]
            assert (await env.step(RefEchoAction(message="abc"))).reward == pytest.approx(0.3)

    asyncio.run(episode())


def test_our_sync_and_generic_clients_against_reference_server(theirs: str) -> None:
    with RefEcho(base_url=theirs).sync() as env:
        env.reset()
        assert env.step(RefEchoAction(message="sync")).observation.echoed_message == "sync"
    with GenericEnvClient(theirs).sync() as env:
        env.reset()
        result = env.step({"message": "dict"})
        assert result.observation["echoed_message"] == "dict" and result.reward == pytest.approx(
            0.4
        )
        assert env.state()["step_count"] == 1
