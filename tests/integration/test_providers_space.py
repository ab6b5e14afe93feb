"""SpaceProvider and EnvClient.from_env against the local Hub-compatible server: the Space's stage
is read from the Hub until it runs (token for a private one), then its server must answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from openenv_runtime import GenericEnvClient, create_app
from openenv_runtime.providers import ProviderError, SpaceProvider
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import running_server
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation
from tests.support.hub import ALICE_TOKEN, HubHandle, running_hub

REPO = "alice/echo-space"


@pytest.fixture(scope="module")
def env_server() -> Iterator[str]:
    """The server the Space runs (here: on this machine)."""
    app = create_app(
        EchoEnvironment, EchoAction, EchoObservation, settings=ServerSettings(web_interface=False)
    )
    with running_server(app) as url:
        yield url


@pytest.fixture
def hub() -> Iterator[HubHandle]:
    with running_hub() as handle:
        yield handle


def seed_space(hub: HubHandle, *, visibility: str = "public", polls: int = 2) -> None:
    repo = hub.state.create_repo(REPO, visibility=visibility, author="alice")
    hub.state.build_polls = polls
    hub.state.commit(repo, author="alice", summary="app", writes={"Dockerfile": b"FROM scratch\n"})


def runtime_reads(hub: HubHandle) -> int:
    return len(hub.state.calls("GET", f"/api/spaces/{REPO}/runtime"))


def test_waits_while_the_space_builds(
    hub: HubHandle, env_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_space(hub, polls=3)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)  # the Hub comes from HF_ENDPOINT
    monkeypatch.delenv("HF_TOKEN", raising=False)
    provider = SpaceProvider(REPO, url=env_server, poll_interval=0.05)
    assert provider.start() == [env_server]
    assert provider.last_stage == "RUNNING" and runtime_reads(hub) == 4
    provider.stop()
    provider.stop()


def test_from_env_connects(hub: HubHandle, env_server: str) -> None:
    seed_space(hub, polls=0)
    provider = SpaceProvider(REPO, endpoint=hub.url, url=env_server, poll_interval=0.05)
    with GenericEnvClient.from_env(REPO, provider=provider).sync() as env:
        assert env.step({"message": "from the hub"}).observation["echoed_message"] == "from the hub"


def test_private_space_needs_the_token(
    hub: HubHandle, env_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_space(hub, visibility="private", polls=0)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(ProviderError, match=r"without a token \(HTTP 40\d\).*set HF_TOKEN"):
        SpaceProvider(REPO, endpoint=hub.url, url=env_server).start()
    monkeypatch.setenv("HF_TOKEN", ALICE_TOKEN)
    provider = SpaceProvider(REPO, endpoint=hub.url, url=env_server, poll_interval=0.05)
    assert provider.start() == [env_server]
    assert hub.state.calls("GET", f"/api/spaces/{REPO}/runtime")[-1].user == "alice"


def test_build_error_is_reported(hub: HubHandle, env_server: str) -> None:
    hub.state.build_result = "BUILD_ERROR"
    seed_space(hub, polls=1)
    with pytest.raises(ProviderError, match=r"in stage BUILD_ERROR; see its logs"):
        SpaceProvider(REPO, endpoint=hub.url, url=env_server, poll_interval=0.05).start()


def test_running_space_that_does_not_answer(hub: HubHandle) -> None:
    seed_space(hub, polls=0)
    provider = SpaceProvider(
        REPO, endpoint=hub.url, url="http://127.0.0.1:9", startup_timeout=0.5, poll_interval=0.05
    )
    with pytest.raises(
        ProviderError, match=r"RUNNING but http://127.0.0.1:9/health does not answer"
    ):
        provider.start()


def test_url_comes_from_the_hub(hub: HubHandle) -> None:
    seed_space(hub, polls=0)
    provider = SpaceProvider(REPO, endpoint=hub.url, startup_timeout=0.5, poll_interval=0.05)
    # No network here: the Space's real host cannot answer, but the error names it.
    with pytest.raises(ProviderError, match=r"https://alice-echo-space\.hf\.space/health"):
        provider.start()
