import asyncio

import pytest

from openenv_runtime import EnvClient, EnvError, State
from openenv_runtime.client import ws_url
from openenv_runtime.client.env_client import _default_token
from tests.fixtures.echo import EchoAction, EchoObservation


class Echo(EnvClient[EchoAction, EchoObservation, State]):
    pass


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("http://127.0.0.1:8000", "ws://127.0.0.1:8000/ws"),
        ("https://org-env.hf.space/", "wss://org-env.hf.space/ws"),
        ("ws://host:1/ws", "ws://host:1/ws"),
        ("http://host/prefix", "ws://host/prefix/ws"),
    ],
)
def test_ws_url(base: str, expected: str) -> None:
    assert ws_url(base) == expected


def test_bad_url_is_a_clear_error() -> None:
    with pytest.raises(EnvError, match="not a server URL"):
        ws_url("localhost:8000")


def test_models_come_from_generic_parameters() -> None:
    assert (Echo.action_cls, Echo.observation_cls, Echo.state_cls) == (
        EchoAction,
        EchoObservation,
        State,
    )


def test_hf_token_only_for_spaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    assert _default_token("https://org-env.hf.space") == "hf_x"
    assert _default_token("http://127.0.0.1:8000") is None
    assert Echo("https://org-env.hf.space").token == "hf_x"


def test_parse_result_reads_reward_and_done_from_envelope() -> None:
    result = Echo("http://x")._parse_result(
        {
            "observation": {"echoed_message": "hi", "message_length": 2, "metadata": {"a": 1}},
            "reward": 0.2,
            "done": True,
        }
    )
    assert result.reward == 0.2 and result.done is True
    assert result.observation.reward == 0.2 and result.observation.metadata == {"a": 1}


def test_unknown_observation_fields_from_a_newer_server_are_ignored() -> None:
    result = Echo("http://x")._parse_result(
        {
            "observation": {"echoed_message": "hi", "message_length": 2, "added_later": [1]},
            "reward": 0.2,
            "done": False,
        }
    )
    assert result.observation.echoed_message == "hi"


class QuietConnect(Echo):
    """A subclass whose connect() returns nothing, as user code often does."""

    connects = 0

    async def connect(self) -> None:  # type: ignore[override]
        QuietConnect.connects += 1

    async def close(self) -> None:
        pass


def test_async_with_and_await_give_the_client_whatever_connect_returns() -> None:
    QuietConnect.connects = 0
    client = QuietConnect("http://127.0.0.1:1")

    async def use() -> None:
        async with client as entered:
            assert entered is client
        assert await client is client

    asyncio.run(use())
    assert QuietConnect.connects == 2
