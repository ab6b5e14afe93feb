"""reasoning_gym:NAME targets: typed options, entries by index or seed, score_answer as reward."""

from __future__ import annotations

from typing import Any

import pytest

reasoning_gym = pytest.importorskip("reasoning_gym")

from openenv_runtime.adapters.reasoning_gym import (  # noqa: E402
    ReasoningGymAction,
    ReasoningGymEnvironment,
    load,
)
from openenv_runtime.adapters.target import create_family_app, parse_family_target  # noqa: E402
from openenv_runtime.errors import AdapterError  # noqa: E402


def make(name: str = "leg_counting", **options: str) -> ReasoningGymEnvironment:
    env = load(name, {"size": "20", "seed": "3", **options}).factory()
    assert isinstance(env, ReasoningGymEnvironment)
    return env


def answers(entry: dict[str, Any]) -> list[str]:
    """A correct, a partly correct (the answer inside more text) and a wrong answer."""
    return [entry["answer"], f"{entry['answer']} legs", "no idea", ""]


def test_reset_with_task_index_starts_that_entry_with_its_question_unwrapped() -> None:
    dataset = reasoning_gym.create_dataset("leg_counting", size=20, seed=3)
    env = make()
    for index in (0, 7, 19):
        observation = env.reset(task_index=index)
        assert observation.question == dataset[index]["question"]
        assert observation.task_index == index
        assert env.state.task_index == index
        assert observation.metadata["source_index"] == index


def test_task_index_may_arrive_as_a_string_and_out_of_range_is_refused() -> None:
    env = make()
    assert env.reset(task_index="4").task_index == 4
    with pytest.raises(IndexError, match="outside"):
        env.reset(task_index=20)
    with pytest.raises(ValueError, match="integer"):
        env.reset(task_index=True)


def test_seed_picks_the_entry_seed_modulo_size_and_bare_resets_share_one_cursor() -> None:
    adapted = load("leg_counting", {"size": "5", "seed": "1"})
    first, second = adapted.factory(), adapted.factory()
    assert first.reset(seed=12).metadata["source_index"] == 2
    seen = [env.reset().metadata["source_index"] for env in (first, second, first, second)]
    assert seen == [0, 1, 2, 3]  # two sessions, four different entries
    assert first.reset().metadata["source_index"] == 4
    assert second.reset().metadata["source_index"] == 0  # wraps around


@pytest.mark.parametrize("name", ["leg_counting", "basic_arithmetic", "spell_backward"])
def test_reward_is_exactly_score_answer_partial_credit_included(name: str) -> None:
    dataset = reasoning_gym.create_dataset(name, size=20, seed=3)
    env = make(name)
    rewards: list[float] = []
    for index in range(5):
        entry = dataset[index]
        for answer in answers(entry):
            env.reset(task_index=index)
            observation = env.step(ReasoningGymAction(answer=answer))
            assert observation.reward == dataset.score_answer(answer, entry)
            assert observation.done
            rewards.append(float(observation.reward or 0.0))
    assert any(0 < r < 1 for r in rewards), "no partial credit was exercised"


def test_observation_metadata_helps_a_trainer_without_giving_the_answer_away() -> None:
    env = make()
    observation = env.reset(task_index=0)
    assert set(observation.metadata) <= {"source_dataset", "source_index", "difficulty"}
    assert observation.metadata["source_dataset"] == "leg_counting"
    assert "total_legs" not in observation.model_dump_json()


def test_attempts_give_feedback_until_correct_or_out_of_attempts() -> None:
    dataset = reasoning_gym.create_dataset("leg_counting", size=20, seed=3)
    env = make(attempts="3")
    observation = env.reset(task_index=1)
    assert observation.attempts_left == 3
    observation = env.step(ReasoningGymAction(answer="no idea"))
    assert (observation.done, observation.reward, observation.attempts_left) == (False, 0.0, 2)
    assert observation.feedback is not None and "2 attempts left" in observation.feedback
    assert dataset[1]["answer"] not in observation.feedback
    observation = env.step(ReasoningGymAction(answer=dataset[1]["answer"]))
    assert (observation.done, observation.reward, observation.feedback) == (True, 1.0, None)

    env.reset(task_index=1)
    results = [env.step(ReasoningGymAction(answer=str(n))) for n in range(3)]
    assert [r.done for r in results] == [False, False, True]
    with pytest.raises(RuntimeError, match="reset"):
        env.step(ReasoningGymAction(answer="1"))


def test_options_are_typed_by_the_datasets_config() -> None:
    env = load(
        "basic_arithmetic",
        {"size": "3", "seed": "0", "operators": "+,-", "allow_parentheses": "false"},
    ).factory()
    assert isinstance(env, ReasoningGymEnvironment)
    config = env.source.dataset.config
    assert (config.size, config.seed, config.operators, config.allow_parentheses) == (
        3,
        0,
        ["+", "-"],
        False,
    )
    json_list = load("basic_arithmetic", {"operators": '["*"]'}).factory()
    assert json_list.source.dataset.config.operators == ["*"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("leg_countin", {}, "Did you mean leg_counting"),
        ("leg_counting", {"legs": "3"}, "has no option 'legs'.*min_animals"),
        ("leg_counting", {"size": "many"}, "size='many' is not a valid int"),
        ("leg_counting", {"attempts": "0"}, "attempts='0'"),
        ("leg_counting", {"min_animals": "9", "max_animals": "2"}, "refused the options"),
    ],
)
def test_bad_targets_say_what_to_fix(name: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(AdapterError, match=message):
        load(name, options)


def test_task_api_lists_the_entries_of_one_split() -> None:
    env = make()
    assert env.list_splits() == ["train"]
    assert env.num_tasks("train") == 20
    task = env.get_task("train", 3)
    assert task["index"] == 3 and task["question"] == env.reset(task_index=3).question
    assert "answer" not in task
    assert [t["index"] for t in env.get_task_range("train", 18, None)] == [18, 19]
    assert len(env.list_tasks("train")) == 20
    with pytest.raises(IndexError, match="split 'test'"):
        env.num_tasks("test")


def test_a_family_target_builds_an_app() -> None:
    target = parse_family_target("reasoning_gym:leg_counting?size=5&seed=3")
    assert target is not None
    app = create_family_app(target)
    assert app.title


def test_one_task_api_request_generates_a_bounded_number_of_entries() -> None:
    env = load("leg_counting", {"size": "1000000", "seed": "1"}).factory()
    assert isinstance(env, ReasoningGymEnvironment)
    with pytest.raises(IndexError, match="pages of at most 10000"):
        env.list_tasks("train")
    assert len(env.get_task_range("train", 500_000, 500_002)) == 2
