import asyncio
import inspect
import sys
from types import FrameType, SimpleNamespace
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from openenv_runtime import EnvClient, EnvError, State
from openenv_runtime.client import ws_url
from openenv_runtime.client.env_client import _default_token
from openenv_runtime.client.transport import ConnectionLost
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


def test_an_observation_that_does_not_validate_still_raises() -> None:
    # unknown fields are dropped on a second try; a wrong value is not "unknown"
    for body in (
        {"echoed_message": ["not", "text"], "message_length": 2},
        {"echoed_message": ["not", "text"], "message_length": 2, "added_later": 1},
    ):
        with pytest.raises(ValidationError):
            Echo("http://x")._parse_result({"observation": body, "reward": 0.0, "done": False})


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


# -- the request path, on a resuming session with connections the test answers by hand ------
OBSERVATION = (
    '{"type":"observation","data":{"observation":{"echoed_message":"hi","message_length":2},'
    '"reward":1.0,"done":false}}'
)
STATE = '{"type":"state","data":{"episode_id":"e","step_count":1}}'


class ManualConnection:
    """A connection whose replies the test hands out in order (or at once, with ``auto``)."""

    def __init__(self, auto: str | None = None) -> None:
        self.auto = auto
        self.sent: list[str] = []
        self.replies: list[asyncio.Future[str | bytes]] = []
        self.response = SimpleNamespace(
            headers={"X-OpenEnv-Session": "s", "X-OpenEnv-Resume-Token": "t"}
        )
        self.is_open = True

    def submit(self, text: str) -> asyncio.Future[str | bytes]:
        reply: asyncio.Future[str | bytes] = asyncio.get_running_loop().create_future()
        self.sent.append(text)
        self.replies.append(reply)
        if self.auto is not None:
            reply.get_loop().call_soon(reply.set_result, self.auto)
        return reply

    def answer(self, raw: str) -> None:
        next(r for r in self.replies if not r.done()).set_result(raw)

    def drop(self) -> None:
        for reply in self.replies:
            if not reply.done():
                reply.set_exception(ConnectionLost("the connection closed (no close frame)"))

    def send(self, text: str) -> None:
        pass

    async def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


async def resuming(*connections: ManualConnection) -> Echo:
    """A connected, resuming client whose connections are ``connections``, in turn."""
    env = Echo("http://127.0.0.1:1")
    opened = iter(connections)
    assert env._resumer is not None

    async def opener(headers: dict[str, str]) -> Any:
        return next(opened)

    env._resumer.open_connection = opener
    await env.connect()
    return env


async def _turn() -> None:
    for _ in range(5):  # let the other tasks run as far as they can
        await asyncio.sleep(0)


def test_a_usual_step_runs_one_coroutine_and_takes_no_lock() -> None:
    # The usual step (connected, nothing else in flight) is sent straight from step():
    # no lock, no coroutine per layer. This runs on every step of every session.
    async def run() -> set[str]:
        env = await resuming(ManualConnection(auto=OBSERVATION))
        await env.step(EchoAction(message="hi"))
        started: set[str] = set()

        def profile(frame: FrameType, event: str, arg: object) -> None:
            code = frame.f_code
            if event == "call" and code.co_flags & inspect.CO_COROUTINE and code is not own:
                started.add(f"{frame.f_globals['__name__']}.{code.co_name}")  # 3.10: no co_qualname

        own = run.__code__
        sys.setprofile(profile)
        try:
            result = await env.step(EchoAction(message="hi"))
        finally:
            sys.setprofile(None)
        assert result.observation.echoed_message == "hi" and result.reward == 1.0
        return started

    assert asyncio.run(run()) == {"openenv_runtime.client.env_client.step"}


def test_requests_of_a_resuming_session_go_one_at_a_time() -> None:
    async def run() -> None:
        conn = ManualConnection()
        env = await resuming(conn)
        step = asyncio.create_task(env.step(EchoAction(message="hi")))
        await _turn()
        state = asyncio.create_task(env.state())
        await _turn()
        assert len(conn.sent) == 1  # the state request waits for the step's reply
        conn.answer(OBSERVATION)
        await _turn()
        assert step.done() and len(conn.sent) == 2
        assert ['"seq":1}' in conn.sent[0], '"seq":2}' in conn.sent[1]] == [True, True]
        conn.answer(STATE)
        assert (await state).step_count == 1
        third = asyncio.create_task(env.step(EchoAction(message="hi")))
        await _turn()
        assert '"seq":3}' in conn.sent[2]
        conn.answer(OBSERVATION)
        await third

    asyncio.run(run())


def test_a_cancelled_waiting_request_does_not_hold_up_the_next() -> None:
    async def run() -> None:
        conn = ManualConnection()
        env = await resuming(conn)
        first = asyncio.create_task(env.step(EchoAction(message="hi")))
        await _turn()
        waiting = asyncio.create_task(env.state())
        await _turn()
        waiting.cancel()
        await _turn()
        assert waiting.cancelled()
        after = asyncio.create_task(env.state())
        await _turn()
        conn.answer(OBSERVATION)
        await first
        await _turn()
        assert len(conn.sent) == 2 and conn.sent[1].startswith('{"type":"state"')
        conn.answer(STATE)
        assert (await after).episode_id == "e"

    asyncio.run(run())


def test_a_step_whose_connection_drops_is_sent_again_under_its_number() -> None:
    async def run() -> None:
        first, second = ManualConnection(), ManualConnection(auto=OBSERVATION)
        env = await resuming(first, second)
        step = asyncio.create_task(env.step(EchoAction(message="hi")))
        await _turn()
        first.drop()
        result = await step
        assert result.observation.echoed_message == "hi"
        assert second.sent == first.sent  # the same request, the same number
        assert env._resumer is not None and env._resumer.resumes == 1
        await env.step(EchoAction(message="hi"))
        assert '"seq":2}' in second.sent[-1]

    asyncio.run(run())


class Sink:
    """A ``ReplySink`` that keeps what it is given."""

    def __init__(self) -> None:
        self.outcome: list[object] = []

    def done(self) -> bool:
        return bool(self.outcome)

    def set_result(self, result: str | bytes, /) -> None:
        self.outcome.append(result)

    def set_exception(self, exception: BaseException, /) -> None:
        self.outcome.append(exception)


def test_the_pool_s_request_on_a_resuming_session_is_sent_at_once() -> None:
    # EnvPool sends through _submit_to: with nothing in flight, the numbered request goes
    # out in the call itself (no task per request), and the next waits for its reply.
    async def run() -> None:
        conn = ManualConnection()
        env = await resuming(conn)
        first, second = Sink(), Sink()
        assert env.submit_to(env.step_frame(EchoAction(message="hi")), first)
        assert len(conn.sent) == 1 and '"seq":1}' in conn.sent[0]
        assert env.submit_to('{"type":"state"}', second)
        await _turn()
        assert len(conn.sent) == 1
        conn.answer(OBSERVATION)
        await _turn()
        assert first.outcome == [OBSERVATION] and len(conn.sent) == 2
        conn.answer(STATE)
        await _turn()
        assert second.outcome == [STATE]

    asyncio.run(run())


def test_the_pool_s_request_is_resumed_when_its_connection_drops() -> None:
    async def run() -> None:
        first, second = ManualConnection(), ManualConnection(auto=OBSERVATION)
        env = await resuming(first, second)
        sink = Sink()
        assert env.submit_to(env.step_frame(EchoAction(message="hi")), sink)
        first.drop()
        for _ in range(20):
            await _turn()
            if sink.outcome:
                break
        assert sink.outcome == [OBSERVATION] and second.sent == first.sent
        following = Sink()
        assert env.submit_to('{"type":"state"}', following)
        assert '"seq":2}' in second.sent[-1]

    asyncio.run(run())
