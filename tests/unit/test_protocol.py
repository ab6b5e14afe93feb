import json

import pytest

from openenv_runtime import Observation, State
from openenv_runtime.errors import EnvError
from openenv_runtime.protocol import (
    ErrorCode,
    decode,
    error_message,
    observation_message,
    reply_data,
    state_message,
)


class Obs(Observation):
    text: str = ""


def test_observation_message_moves_reward_and_done_to_envelope_and_keeps_metadata() -> None:
    msg = json.loads(observation_message(Obs(text="hi", reward=0.5, done=True, metadata={"k": 1})))
    assert msg == {
        "type": "observation",
        "data": {
            "observation": {"text": "hi", "metadata": {"k": 1}},
            "reward": 0.5,
            "done": True,
            # also beside the observation, where reference clients read StepResult.metadata
            "metadata": {"k": 1},
        },
    }


def test_empty_metadata_stays_out_of_the_envelope() -> None:
    data = json.loads(observation_message(Obs(text="hi")))["data"]
    assert "metadata" not in data and data["observation"]["metadata"] == {}


def test_null_reward() -> None:
    assert json.loads(observation_message(Obs()))["data"]["reward"] is None


def test_state_message() -> None:
    assert json.loads(state_message(State(episode_id="x", step_count=3))) == {
        "type": "state",
        "data": {"episode_id": "x", "step_count": 3},
    }


def test_error_message_carries_code_and_extra_fields() -> None:
    msg = json.loads(
        error_message(ErrorCode.CAPACITY_REACHED, "full", active_sessions=2, max_sessions=2)
    )
    assert msg == {
        "type": "error",
        "data": {
            "message": "full",
            "code": "CAPACITY_REACHED",
            "active_sessions": 2,
            "max_sessions": 2,
        },
    }


def test_decode_rejects_invalid_json() -> None:
    with pytest.raises(ValueError):
        decode("{not json")
    assert decode(b'{"type": "state"}') == {"type": "state"}


@pytest.mark.parametrize(
    ("raw", "reward"),
    [
        ('{"type":"observation","data":{"observation":{},"reward":0.5,"done":false}}', 0.5),
        # what Python's json module writes for a reference server's float("nan") or a huge int:
        # the fast reader refuses both, the reply still reads as before
        ('{"type":"observation","data":{"observation":{},"reward":NaN,"done":false}}', "nan"),
        ('{"type":"observation","data":{"observation":{},"reward":Infinity,"done":false}}', "inf"),
        (
            '{"type":"observation","data":{"observation":{},"reward":'
            + "9" * 30
            + ',"done":false}}',
            int("9" * 30),
        ),
    ],
)
def test_reply_data_reads_what_every_server_writes(raw: str, reward: object) -> None:
    for frame in (raw, raw.encode()):
        got = reply_data(frame)["reward"]
        if isinstance(reward, str):
            assert str(got) == reward
        else:
            assert got == reward


def test_reply_data_raises_the_error_reply_as_env_error() -> None:
    raw = '{"type":"error","data":{"message":"bad","code":"VALIDATION_ERROR","field":"x"}}'
    with pytest.raises(EnvError) as caught:
        reply_data(raw)
    assert (caught.value.code, caught.value.details) == ("VALIDATION_ERROR", {"field": "x"})
