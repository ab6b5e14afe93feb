"""reasoning-gym and TextArena targets served by a real server, exact to their own libraries."""

from __future__ import annotations

from typing import Any

import pytest

reasoning_gym = pytest.importorskip("reasoning_gym")
textarena = pytest.importorskip("textarena")

from openenv_runtime.adapters.reasoning_gym import (  # noqa: E402
    ReasoningGymAction,
    ReasoningGymObservation,
    ReasoningGymState,
)
from openenv_runtime.adapters.target import create_family_app  # noqa: E402
from openenv_runtime.adapters.textarena import (  # noqa: E402
    TextArenaAction,
    TextArenaObservation,
    TextArenaState,
)
from openenv_runtime.client.env_client import EnvClient  # noqa: E402
from openenv_runtime.testing import running_server  # noqa: E402
from tests.support.servers import get_json, post_json  # noqa: E402


class ReasoningGymClient(EnvClient[ReasoningGymAction, ReasoningGymObservation, ReasoningGymState]):
    pass


class TextArenaClient(EnvClient[TextArenaAction, TextArenaObservation, TextArenaState]):
    pass


def three_answers(entry: dict[str, Any], index: int) -> list[str]:
    """The correct answer, a partly correct one (it inside more text) and a wrong one."""
    return [entry["answer"], f"{entry['answer']} {'x' * (1 + index % 5)}", "not an answer"]


@pytest.mark.parametrize("name", ["leg_counting", "basic_arithmetic"])
def test_reasoning_gym_rewards_through_the_server_equal_score_answer(name: str) -> None:
    size, seed = 80, 11
    dataset = reasoning_gym.create_dataset(name, size=size, seed=seed)
    app = create_family_app(f"reasoning_gym:{name}?size={size}&seed={seed}")
    served: list[float] = []
    direct: list[float] = []
    with running_server(app) as url, ReasoningGymClient(base_url=url).sync() as env:
        for index in range(size):
            entry = dataset[index]
            for answer in three_answers(entry, index):  # 3 episodes per entry
                first = env.reset(task_index=index)
                assert first.observation.question == entry["question"]
                result = env.step(ReasoningGymAction(answer=answer))
                assert result.done
                served.append(float(result.reward or 0.0))
                direct.append(dataset.score_answer(answer, entry))
    assert len(served) == 3 * size  # 240 episodes
    assert served == direct
    assert any(0 < r < 1 for r in served) and 1.0 in served and 0.0 in served


def test_reasoning_gym_attempts_and_the_task_api_through_the_server() -> None:
    dataset = reasoning_gym.create_dataset("leg_counting", size=10, seed=2)
    app = create_family_app("reasoning_gym:leg_counting?size=10&seed=2&attempts=2")
    with running_server(app) as url:
        with ReasoningGymClient(base_url=url).sync() as env:
            env.reset(task_index=4)
            wrong = env.step(ReasoningGymAction(answer="no"))
            assert not wrong.done and wrong.observation.feedback
            right = env.step(ReasoningGymAction(answer=dataset[4]["answer"]))
            assert right.done and right.reward == 1.0
        env_name = get_json(url + "/list_environments")[1][0]
        status, body = post_json(f"{url}/{env_name}/num_tasks", {"split": "train"})
        assert (status, body["num_tasks"]) == (200, 10)
        status, body = post_json(f"{url}/{env_name}/task", {"split": "train", "index": 4})
        assert status == 200 and body["task"]["question"] == dataset[4]["question"]
        status, _ = post_json(f"{url}/{env_name}/task", {"split": "train", "index": 10})
        assert status == 400


GUESSES = ["[10]", "hello", "[5]", "[15]", "[3]", "[7]", "[12]", "[1]", "[2]", "[4]", "[6]"]
GUESSES += ["[8]", "[9]", "[11]", "[13]", "[14]", "[16]", "[17]"]


def library_guesses(seed: int) -> tuple[list[str], float]:
    env = textarena.make("GuessTheNumber-v0")
    env.reset(num_players=1, seed=seed)
    moves, texts, done = iter(GUESSES), [], False
    while not done:
        _player, text = env.get_observation()
        texts.append(text)
        done, _info = env.step(action=next(moves))
    rewards, _game_info = env.close()
    return texts, float(rewards[0])


def test_a_textarena_game_through_the_server_is_the_librarys_own() -> None:
    app = create_family_app("textarena:GuessTheNumber-v0")
    with running_server(app) as url, TextArenaClient(base_url=url).sync() as env:
        for seed in (0, 1, 2, 3):
            expected_texts, expected_reward = library_guesses(seed)
            moves, texts = iter(GUESSES), []
            result = env.reset(seed=seed)
            while not result.done:
                texts.append(result.observation.text)
                result = env.step(TextArenaAction(action=next(moves)))
            assert texts == expected_texts
            assert result.reward == expected_reward
            assert result.observation.rewards == {0: expected_reward}
        # a reset with empty data starts a one-player game
        assert "Guess The Number" in env.reset().observation.text


def test_an_answer_after_the_end_is_a_clear_error_and_the_session_goes_on() -> None:
    from openenv_runtime import EnvError

    app = create_family_app("reasoning_gym:leg_counting?size=5&seed=1")
    with running_server(app) as url, ReasoningGymClient(base_url=url).sync() as env:
        env.reset(task_index=0)
        env.step(ReasoningGymAction(answer="1"))
        with pytest.raises(EnvError, match=r"call reset\(\) first"):
            env.step(ReasoningGymAction(answer="1"))
        with pytest.raises(EnvError, match="outside dataset 'leg_counting'"):
            env.reset(task_index=5)
        assert env.reset(task_index=2).observation.task_index == 2
