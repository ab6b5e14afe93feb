import asyncio
import sys
from types import FrameType
from typing import Any, ClassVar

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


STEP_REPLY = {
    "observation": {"echoed_message": "hi", "message_length": 2},
    "reward": 1.0,
    "done": False,
}


def _python_calls(run: Any) -> list[str]:
    """The files of the Python functions ``run()`` calls (C functions are not counted)."""
    seen: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            seen.append(frame.f_code.co_filename)

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return seen


def test_a_step_runs_no_python_code_of_pydantic() -> None:
    # The client's CPU per step is paid for every session of a trainer: the observation's
    # fields and validator are looked up once per class, not through pydantic's Python
    # wrappers (model_fields, model_validate) on every reply.
    env = Echo("http://x")
    action = EchoAction(message="hi")
    env._parse_result(STEP_REPLY)
    calls = _python_calls(lambda: (env._parse_result(STEP_REPLY), env._action_json(action)))
    assert not [f for f in calls if "pydantic" in f]


class CheckedObservation(EchoObservation):
    validated: ClassVar[int] = 0

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> "CheckedObservation":
        cls.validated += 1
        return super().model_validate(obj, **kwargs)


class Checked(EnvClient[EchoAction, CheckedObservation, State]):
    pass


def test_an_observation_class_s_own_model_validate_still_reads_replies() -> None:
    CheckedObservation.validated = 0
    result = Checked("http://x")._parse_result(STEP_REPLY)
    Checked("http://x")._parse_result(STEP_REPLY)
    assert isinstance(result.observation, CheckedObservation)
    assert (result.observation.echoed_message, result.reward) == ("hi", 1.0)
    assert CheckedObservation.validated == 2


class Payload(Echo):
    def _step_payload(self, action: EchoAction) -> dict[str, Any]:
        return {"message": action.message.upper()}


class PayloadChild(Payload):
    pass


def test_a_reference_step_payload_hook_is_used_by_subclasses_too() -> None:
    assert Echo("http://x")._action_json(EchoAction(message="hi")) == (
        '{"metadata":{},"message":"hi","wait":0.0}'
    )
    for cls in (Payload, PayloadChild):
        assert cls("http://x")._action_json(EchoAction(message="hi")) == '{"message":"HI"}'


class Parsed(Echo):
    def _parse_result(self, data: dict[str, Any]) -> Any:
        return ("parsed", data["reward"])


def test_the_pools_port_reads_replies_through_the_reference_parse_result_hook() -> None:
    # the pool's seam is public (parse_result); a subclass still overrides the reference's hook
    assert Parsed("http://x").parse_result({"reward": 2.0}) == ("parsed", 2.0)
    assert Echo("http://x").step_frame(EchoAction(message="hi")).startswith('{"type":"step"')
    assert Echo("http://x").reset_frame(seed=3).startswith('{"type":"reset"')


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
