"""The one-pass reply reader gives exactly what the general way gives, or nothing."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ConfigDict, field_validator, model_validator

from openenv_runtime import EnvClient, Observation, State, StepResult
from openenv_runtime.client.reply_reader import one_pass_reader
from openenv_runtime.protocol import reply_data
from tests.fixtures.echo import EchoAction, EchoObservation


class Plain(Observation):
    text: str = ""
    score: float = 0.0


class Open(Observation):
    model_config = ConfigDict(extra="allow")
    text: str = ""


class Ignoring(Observation):
    model_config = ConfigDict(extra="ignore")
    text: str = ""


class Validated(Observation):
    text: str = ""

    @field_validator("reward")
    @classmethod
    def _reward(cls, value: Any) -> Any:
        return value


class Checked(Observation):
    @model_validator(mode="after")
    def _check(self) -> Checked:
        return self


class PostInit(Observation):
    def model_post_init(self, context: Any, /) -> None:
        self.metadata["seen"] = self.done


class Strict(Observation):
    model_config = ConfigDict(strict=True)


class OwnReward(Observation):
    reward: float = 0.0  # type: ignore[assignment]


def _general(cls: type[Observation], raw: str) -> StepResult[Any]:
    class Client(EnvClient[EchoAction, cls, State]):  # type: ignore[valid-type]
        pass

    return Client("http://127.0.0.1:1")._parse_result(reply_data(raw))


def _frame(observation: str, reward: str = "0.5", done: str = "false", rest: str = "") -> str:
    return (
        '{"type":"observation","data":{"observation":'
        + observation
        + ',"reward":'
        + reward
        + ',"done":'
        + done
        + rest
        + "}}"
    )


READABLE = [
    (Plain, _frame('{"text":"hi","score":2,"metadata":{"a":[1,2]}}')),
    (Plain, _frame("{}", "1", "true")),
    (Plain, _frame('{"score":"2"}')),  # the observation's own (lax) config still applies
    (Plain, _frame("{}", "true")),
    (Plain, _frame("{}", "null")),
    (Plain, _frame("{}", "NaN")),
    (Plain, _frame("{}", "-Infinity")),
    (Plain, _frame("{}", "9" * 30)),
    (Plain, _frame("{}", "1e400")),
    (Plain, _frame("{}", rest=',"metadata":{"m":1}')),
    (Plain, _frame("{}", rest=',"seq":4,"later":{"x":1}')),
    (Open, _frame('{"text":"a","new":[1]}')),
    (Ignoring, _frame('{"text":"a","new":[1]}')),
    (EchoObservation, _frame('{"echoed_message":"x","message_length":1}', "0.1", "true")),
]


def _same(one: StepResult[Any], general: StepResult[Any]) -> None:
    def canonical(value: Any) -> Any:
        return repr(value) if isinstance(value, float) and math.isnan(value) else value

    assert type(one.observation) is type(general.observation)
    # repr: NaN equals NaN, and 1 differs from 1.0
    assert repr(one.observation.model_dump()) == repr(general.observation.model_dump())
    assert one.observation.model_fields_set == general.observation.model_fields_set
    assert one.observation.model_extra == general.observation.model_extra
    assert (canonical(one.reward), one.done, one.metadata) == (
        canonical(general.reward),
        general.done,
        general.metadata,
    )
    assert type(one.reward) is type(general.reward) and type(one.done) is type(general.done)


@pytest.mark.parametrize(("cls", "raw"), READABLE)
def test_what_it_reads_is_what_the_general_way_reads(cls: type[Observation], raw: str) -> None:
    read = one_pass_reader(cls)
    assert read is not None
    for frame in (raw, raw.encode()):
        one = read(frame)
        assert one is not None
        _same(one, _general(cls, raw))


@pytest.mark.parametrize(
    "raw",
    [
        '{"type":"error","data":{"message":"bad","code":"VALIDATION_ERROR"}}',
        _frame('{"text":"a","unknown":1}'),  # a newer server's field: the general way drops it
        _frame("{}", done="null"),
        _frame("{}", reward='"high"'),
        _frame("{}", reward='"0.5"'),  # the general way's StepResult.reward is the string
        _frame("{}", done='"false"'),  # the general way reads bool("false"): True
        _frame("{}", done="1"),
        '{"type":"observation","data":{"observation":{}}}',
        "not json",
    ],
)
def test_what_it_does_not_accept_as_it_is_is_left_to_the_general_way(raw: str) -> None:
    read = one_pass_reader(Plain)
    assert read is not None
    assert read(raw) is None


@pytest.mark.parametrize("cls", [Validated, Checked, PostInit, Strict, OwnReward])
def test_classes_that_must_see_reward_and_done_while_validating_have_no_reader(
    cls: type[Observation],
) -> None:
    assert one_pass_reader(cls) is None
