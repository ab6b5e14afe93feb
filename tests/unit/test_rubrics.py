"""Rubrics: the base class, its tree, the combinators, trajectory rubrics, Environment hooks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from openenv_runtime import Environment, Observation, State
from openenv_runtime.rubrics import (
    ExponentialDiscountingTrajectoryRubric,
    Gate,
    Rubric,
    RubricDict,
    RubricList,
    Sequential,
    TrajectoryRubric,
    WeightedSum,
)


class Const(Rubric):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value
        self.calls = 0

    def forward(self, action: Any, observation: Any) -> float:
        self.calls += 1
        return self.value


class AsyncConst(Const):
    async def forward(self, action: Any, observation: Any) -> float:  # type: ignore[override]
        await asyncio.sleep(0)
        self.calls += 1
        return self.value


class Obs(Observation):
    text: str = ""


def test_call_records_last_score_and_runs_hooks() -> None:
    rubric, seen = Const(0.7), []
    rubric.register_forward_pre_hook(lambda r, a, o: seen.append("pre"))
    rubric.register_forward_hook(lambda r, a, o, score: seen.append(score))
    assert rubric(None, None) == 0.7 and rubric.last_score == 0.7 and seen == ["pre", 0.7]


def test_children_are_registered_and_addressable_by_path() -> None:
    inner = Const(1.0)
    tree = RubricDict({"format": Sequential(inner, Const(0.5)), "style": Const(0.2)})
    names = [name for name, _ in tree.named_rubrics()]
    assert names == ["format", "format.rubric_0", "format.rubric_1", "style"]
    assert tree.get_rubric("format.rubric_0") is inner
    with pytest.raises(KeyError, match=r"format\.nope"):
        tree.get_rubric("format.nope")


def test_sequential_stops_at_the_first_zero() -> None:
    late = Const(0.9)
    assert Sequential(Const(0.0), late)(None, None) == 0.0 and late.calls == 0
    assert Sequential(Const(0.5), Const(0.8))(None, None) == 0.8


def test_gate_and_weighted_sum() -> None:
    assert Gate(Const(0.6), threshold=0.7)(None, None) == 0.0
    assert Gate(Const(0.8), threshold=0.7)(None, None) == 0.8
    assert WeightedSum([Const(1.0), Const(0.5)], [0.25, 0.75])(None, None) == pytest.approx(0.625)
    with pytest.raises(ValueError, match="sum to 1"):
        WeightedSum([Const(1.0)], [0.5])
    with pytest.raises(ValueError, match="weight"):
        WeightedSum([Const(1.0)], [0.5, 0.5])


def test_containers_hold_but_do_not_score() -> None:
    items = RubricList([Const(1.0), Const(2.0)])
    assert len(items) == 2 and [r.value for r in items] == [1.0, 2.0]  # type: ignore[attr-defined]
    with pytest.raises(NotImplementedError, match="combine"):
        items(None, None)


def test_async_children_make_the_combinator_awaitable() -> None:
    rubric = WeightedSum([Const(1.0), AsyncConst(0.0)], [0.5, 0.5])
    pending = rubric(None, None)
    assert asyncio.iscoroutine(pending)
    assert asyncio.run(pending) == 0.5 and rubric.last_score == 0.5
    assert asyncio.run(Sequential(AsyncConst(0.0), Const(1.0))(None, None)) == 0.0


def test_sequential_and_gate_are_awaitable_from_async_code_with_async_hooks() -> None:
    seen: list[str] = []

    async def pre(rubric: Rubric, action: Any, observation: Any) -> None:
        seen.append("pre")

    async def main() -> tuple[float, float, float]:
        sequential, gate = Sequential(Const(1.0), Const(0.8)), Gate(Const(0.8), threshold=0.5)
        sequential.register_forward_pre_hook(pre)
        gate.register_forward_pre_hook(pre)
        return await sequential(None, None), await gate(None, None), await Sequential()(None, None)

    assert asyncio.run(main()) == (0.8, 0.8, 1.0) and seen == ["pre", "pre"]
    assert Sequential(Const(1.0), Const(0.8))(None, None) == 0.8  # plain code: the score itself


def test_weighted_sum_lengths_must_match() -> None:
    with pytest.raises(ValueError, match="must match"):
        WeightedSum([Const(0.5), Const(0.5)], [1.0])


class Length(TrajectoryRubric):
    def score_trajectory(self, trajectory: list[tuple[Any, Any]]) -> float:
        return float(len(trajectory))

    def compute_step_rewards(self) -> list[float]:
        return [1.0] * len(self._trajectory)


class Discounted(ExponentialDiscountingTrajectoryRubric):
    def score_trajectory(self, trajectory: list[tuple[Any, Any]]) -> float:
        return 1.0


def test_trajectory_rubric_scores_at_the_end_and_resets() -> None:
    rubric = Length(intermediate_reward=0.1)
    assert rubric("a", Obs()) == 0.1
    assert rubric("b", Obs(done=True)) == 2.0
    rubric.reset()
    assert rubric.trajectory == []


def test_discounting_gives_later_steps_more_credit() -> None:
    rubric = Discounted(gamma=0.5)
    for done in (False, False, True):
        rubric(None, Obs(done=done))
    assert rubric.compute_step_rewards() == [0.25, 0.5, 1.0]
    with pytest.raises(ValueError, match="gamma"):
        Discounted(gamma=1.5)


class Graded(Environment[Any, Obs, State]):
    def __init__(self) -> None:
        super().__init__(
            rubric=Gate(Length(), threshold=2.0),
            transform=lambda o: o.model_copy(update={"text": o.text.upper()}),
        )  # type: ignore[arg-type]
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Obs:
        self._reset_rubric()
        return Obs()

    def step(self, action: Any, **kw: Any) -> Obs:
        obs = self._apply_transform(Obs(text=str(action), done=action == "end"))
        obs.reward = self._apply_rubric(action, obs)
        return obs

    @property
    def state(self) -> State:
        return self._state


def test_environment_applies_its_transform_and_rubric() -> None:
    env = Graded()
    env.reset()
    first = env.step("go")
    assert (first.text, first.reward) == ("GO", 0.0)
    assert env.step("end").reward == 2.0
    env.reset()
    assert env.step("end").reward == 0.0  # the reset cleared the trajectory


def test_async_rubric_needs_the_async_helper() -> None:
    env = Graded()
    env.rubric = AsyncConst(0.3)
    with pytest.raises(TypeError, match="_apply_rubric_async"):
        env._apply_rubric(None, Obs())
    assert asyncio.run(env._apply_rubric_async(None, Obs())) == 0.3


def test_async_reset_prefers_the_rubrics_reset_async() -> None:
    class Episodic(Const):
        async def reset_async(self) -> None:
            self.calls = -1

    env = Graded()
    env.rubric = rubric = Episodic(1.0)
    rubric.calls = 5
    asyncio.run(env._reset_rubric_async())
    assert rubric.calls == -1
