import asyncio

import pytest

from openenv_runtime import Environment, EnvironmentContractError, Observation, State, create_app
from openenv_runtime.environment import missing_members
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation


class NoStep(Environment):
    def reset(self, seed=None, episode_id=None, **kw):  # type: ignore[no-untyped-def]
        return Observation()

    @property
    def state(self) -> State:
        return State()


class PortedAsync(Environment):
    async def reset_async(self, seed=None, episode_id=None, **kw):  # type: ignore[no-untyped-def]
        return Observation()

    async def step_async(self, action, **kw):  # type: ignore[no-untyped-def]
        return Observation()

    @property
    def state(self) -> State:
        return State()


def test_complete_environment_has_nothing_missing() -> None:
    assert missing_members(EchoEnvironment) == []


def test_reference_style_async_variants_count() -> None:
    assert missing_members(PortedAsync) == []


def test_missing_step_is_reported_with_code_to_add() -> None:
    with pytest.raises(EnvironmentContractError) as info:
        create_app(NoStep, EchoAction, EchoObservation)
    message = str(info.value)
    assert "NoStep" in message and "`step`" in message
    assert "def step(self, action" in message


def test_calling_base_method_says_what_to_write() -> None:
    class Half(Environment):
        pass

    with pytest.raises(NotImplementedError, match="def reset"):
        Half().reset()


def test_instance_is_refused_with_the_fix() -> None:
    with pytest.raises(EnvironmentContractError, match=r"create_app\(EchoEnvironment, \.\.\.\)"):
        create_app(EchoEnvironment(), EchoAction, EchoObservation)  # type: ignore[arg-type]


def test_model_classes_are_checked() -> None:
    with pytest.raises(EnvironmentContractError, match="action_cls must be a subclass"):
        create_app(EchoEnvironment, dict, EchoObservation)  # type: ignore[arg-type]


def test_factory_is_accepted_and_called_once_per_session() -> None:
    made: list[EchoEnvironment] = []

    def factory() -> EchoEnvironment:
        made.append(EchoEnvironment())
        return made[-1]

    app = create_app(factory, EchoAction, EchoObservation)
    assert made == []  # building the app makes no instance
    sessions = app.state.openenv_sessions

    async def open_two() -> list[object]:
        return [await sessions.new_instance() for _ in range(2)]

    instances = asyncio.run(open_two())
    assert len(made) == 2 and instances == made and instances[0] is not instances[1]


def test_non_concurrent_environment_serves_one_session() -> None:
    class Single(EchoEnvironment):
        SUPPORTS_CONCURRENT_SESSIONS = False

    app = create_app(Single, EchoAction, EchoObservation, max_concurrent_envs=50)
    assert app.state.openenv_sessions.capacity == 1


def test_the_code_to_add_uses_the_classes_own_types() -> None:
    class EchoNoStep(Environment[EchoAction, EchoObservation, State]):
        def reset(self, seed=None, episode_id=None, **kw):  # type: ignore[no-untyped-def]
            return EchoObservation()

        @property
        def state(self) -> State:
            return State()

    with pytest.raises(EnvironmentContractError) as info:
        create_app(EchoNoStep, EchoAction, EchoObservation)
    message = str(info.value)
    assert "def step(self, action: EchoAction, **kwargs) -> EchoObservation:" in message
    assert "return EchoObservation(..., reward=1.0, done=False)" in message
    assert "MyAction" not in message
