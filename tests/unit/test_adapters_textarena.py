"""textarena:GAME targets: the library's own game, text and rewards, one seat played by the agent."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

textarena = pytest.importorskip("textarena")

from openenv_runtime.adapters.textarena import (  # noqa: E402
    RandomMoves,
    TextArenaAction,
    TextArenaEnvironment,
    TextArenaObservation,
    listed_moves,
    load,
)
from openenv_runtime.environment import Environment  # noqa: E402
from openenv_runtime.errors import AdapterError  # noqa: E402

# More moves than any GuessTheNumber-v0 game takes; one of them is not a move at all.
GUESSES = ["[10]", "hello"] + [f"[{n}]" for n in (5, 15, 3, 7, 12, 1, 2, 4, 6, 8, 9, 11, 13, 14)]


def first_move(text: str) -> str:
    """A deterministic policy for the tests: the first listed move."""
    return (listed_moves(text) or ["[0]"])[0]


def library_game(
    game: str, seed: int, agent: Any, opponent: Any = None, players: int = 1, seat: int = 0
) -> tuple[list[str], dict[int, float]]:
    """The library's own loop: what seat ``seat`` saw at each of its turns, and the rewards."""
    env = textarena.make(game)
    env.reset(num_players=players, seed=seed)
    seen: list[str] = []
    done = False
    while not done:
        player, text = env.get_observation()
        if player == seat:
            seen.append(text)
            move = agent(text)
        else:
            move = opponent(text)
        done, _info = env.step(action=move)
    rewards, _game_info = env.close()
    return seen, {int(k): float(v) for k, v in rewards.items()}


def served_game(
    env: Environment[Any, Any, Any], seed: int, agent: Any
) -> tuple[list[str], TextArenaObservation]:
    seen: list[str] = []
    observation = env.reset(seed=seed)
    while not observation.done:
        seen.append(observation.text)
        observation = env.step(TextArenaAction(action=agent(observation.text)))
    return seen, observation


def scripted(moves: list[str]) -> Any:
    queue = iter(moves)
    return lambda _text: next(queue)


def test_single_player_game_is_the_librarys_own_with_the_same_seed_and_moves() -> None:
    env = load("GuessTheNumber-v0", {}).factory()
    assert isinstance(env, TextArenaEnvironment)
    for seed in (0, 1, 2):
        seen, final = served_game(env, seed, scripted(GUESSES))
        expected_seen, rewards = library_game("GuessTheNumber-v0", seed, scripted(GUESSES))
        assert seen == expected_seen
        assert final.rewards == rewards and final.reward == rewards[0]
        assert "reason" in final.game_info
        assert final.text  # the outcome message the agent's seat got last


def test_an_empty_reset_starts_a_one_player_game_whose_first_text_is_the_prompt() -> None:
    adapted = load("GuessTheNumber-v0", {})
    assert "1 player" in adapted.description
    observation = adapted.factory().reset()
    assert "Guess The Number" in observation.text
    assert (observation.done, observation.reward, observation.player_id) == (False, 0.0, 0)


def test_two_player_game_against_the_random_opponent_matches_the_library_loop() -> None:
    env = load("TicTacToe-v0", {"opponent": "random"}).factory()
    assert isinstance(env, TextArenaEnvironment)
    for seed in range(4):
        seen, final = served_game(env, seed, first_move)
        expected_seen, rewards = library_game(
            "TicTacToe-v0", seed, first_move, RandomMoves(seed), players=2
        )
        assert seen == expected_seen
        assert final.rewards == rewards and final.reward == rewards[0]


def test_the_agent_may_take_the_second_seat() -> None:
    env = load("TicTacToe-v0", {"player": "1"}).factory()
    observation = env.reset(seed=5)
    assert observation.player_id == 1
    assert "[Player 0]" in observation.text  # the opponent has moved already
    seen, final = served_game(env, 5, first_move)
    expected, rewards = library_game(
        "TicTacToe-v0", 5, first_move, RandomMoves(5), players=2, seat=1
    )
    assert seen == expected and final.reward == rewards[1]


def always_center(text: str) -> str:
    return "[4]" if "[4]" in listed_moves(text) else first_move(text)


def test_an_imported_callable_plays_the_other_seat() -> None:
    env = load("TicTacToe-v0", {"opponent": f"{__name__}:always_center", "player": "1"}).factory()
    observation = env.reset(seed=0)
    assert "placed their symbol (O) in cell 4" in observation.text


def test_sessions_keep_their_own_random_draws() -> None:
    # 2048 draws a new tile from the global random after every move.
    moves = ["[Up]", "[Left]", "[Down]", "[Right]"] * 5
    adapted = load("2048-v0-ultra-easy", {})

    def texts(env: Any, seed: int, steps: list[str]) -> list[str]:
        return [env.reset(seed=seed).text] + [
            env.step(TextArenaAction(action=m)).text for m in steps
        ]

    alone = [texts(adapted.factory(), seed, moves) for seed in (7, 8)]
    first, second = adapted.factory(), adapted.factory()
    interleaved: list[list[str]] = [[first.reset(seed=7).text], [second.reset(seed=8).text]]
    random.seed(123)  # the caller's own use of the global random, untouched by the sessions
    for move in moves:
        for env, seen in zip((first, second), interleaved, strict=True):
            seen.append(env.step(TextArenaAction(action=move)).text)
            random.random()
    assert interleaved == alone
    expected = random.Random(123)
    for _ in moves:
        expected.random(), expected.random()
    assert random.random() == expected.random()


def test_constructor_options_reach_the_game() -> None:
    env = load("GuessTheNumber-v0", {"max_turns": "2"}).factory()
    seen, final = served_game(env, 0, scripted(["[1]", "[2]", "[3]", "[4]"]))
    assert "within 2 turns" in seen[0]
    assert final.done and len(seen) < 4


def test_listed_moves_reads_the_latest_line_and_skips_role_tags() -> None:
    text = (
        "[GAME] Available Moves: '[0]', '[1]'\n[Player 0] [4]\n[GAME] Available Moves: '[2]', '[3]'"
    )
    assert listed_moves(text) == ["[2]", "[3]"]
    assert listed_moves("[GAME] no moves here") == []


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("GuessTheNumbr-v0", {}, "Did you mean GuessTheNumber-v0"),
        ("TicTacToe-v0", {"opponent": "nonsense"}, "neither .random., .model. nor MODULE:FUNCTION"),
        ("TicTacToe-v0", {"opponent": "no_such_module_xyz:f"}, "cannot be imported"),
        ("TicTacToe-v0", {"player": "2"}, "not a seat of a 2-player game"),
        ("GuessTheNumber-v0", {"no_such_option": "1"}, "could not make"),
    ],
)
def test_bad_targets_say_what_to_fix(name: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(AdapterError, match=message):
        load(name, options)


def test_a_step_after_the_end_asks_for_a_reset() -> None:
    env = load("GuessTheNumber-v0", {}).factory()
    served_game(env, 0, scripted(GUESSES))
    with pytest.raises(RuntimeError, match="reset"):
        env.step(TextArenaAction(action="[1]"))


def test_a_model_opponent_is_asked_for_each_move_with_its_seats_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("openai")
    from openenv_runtime.testing.stub_llm import StubLLM

    monkeypatch.setenv("OPENENV_OPPONENT_API_KEY", "opponent-key")
    stub = StubLLM(lambda messages: "[4]", api_key="opponent-key")
    with stub.serve() as url:
        options = {"opponent": "model", "opponent_model": "m", "opponent_endpoint": url}
        env = load("TicTacToe-v0", {**options, "player": "1"}).factory()
        observation = env.reset(seed=0)
    assert "placed their symbol (O) in cell 4" in observation.text
    (request,) = stub.requests
    assert request["model"] == "m"
    assert "You are Player 0 in Tic Tac Toe" in request["messages"][-1]["content"]


def test_a_model_opponent_needs_its_model_and_endpoint() -> None:
    with pytest.raises(AdapterError, match="opponent_model=NAME and opponent_endpoint=URL"):
        load("TicTacToe-v0", {"opponent": "model", "opponent_model": "m"})


def test_a_game_whose_data_is_missing_is_refused_when_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from textarena.envs.GuessTheNumber.env import GuessTheNumberEnv

    def missing(self: Any, num_players: int, seed: int | None = None) -> None:
        raise LookupError("**********\n  Resource 'words' not found.\n**********")

    monkeypatch.setattr(GuessTheNumberEnv, "reset", missing)
    with pytest.raises(AdapterError, match=re.escape("with {}: Resource 'words' not found.")):
        load("GuessTheNumber-v0", {})
