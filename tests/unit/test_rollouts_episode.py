"""The one episode player: policies, task ids, per-episode records (no servers: a fake session)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from openenv_runtime.llm.client import LLMResponse
from openenv_runtime.models import StepResult
from openenv_runtime.rollouts.episode import Episode, ModelPolicy, Move, Player
from openenv_runtime.rollouts.mapping import ActionError, default_to_message


class Session:
    """Counts to three; ``{"n": -1}`` is not an action it takes."""

    def __init__(self) -> None:
        self.resets: list[dict[str, Any]] = []
        self.total = 0

    async def reset(self, **options: Any) -> StepResult[dict[str, Any]]:
        self.resets.append(options)
        return StepResult(observation={"total": 0}, reward=None, done=False)

    async def step(self, action: dict[str, Any]) -> StepResult[dict[str, Any]]:
        from openenv_runtime.errors import EnvError

        if action["n"] < 0:
            raise EnvError("VALIDATION_ERROR", "n must be at least 0")
        self.total += action["n"]
        return StepResult(observation={"total": self.total}, reward=1.0, done=self.total >= 3)


class Script:
    """Moves from a list: an action, or a problem (no action)."""

    def __init__(self, moves: list[Any]) -> None:
        self.moves = list(moves)
        self.seen: list[Any] = []

    async def act(self, episode: Episode, messages: list[dict[str, Any]], observation: Any) -> Move:
        self.seen.append(observation)
        move = self.moves.pop(0)
        if isinstance(move, str):
            return Move({"role": "assistant", "content": move}, None, f"no action in {move!r}")
        return Move({"role": "assistant", "content": str(move)}, move)


def play(player: Player, episode: Episode, session: Session | None = None) -> Session:
    session = session or Session()
    asyncio.run(player.play(episode, session))
    return session


def test_a_policy_plays_and_the_episode_keeps_its_record() -> None:
    policy = Script(["hmm", {"n": -1}, {"n": 1}, {"n": 2}])
    player = Player(policy=policy, to_message=default_to_message, max_turns=8, system_prompt="S")
    episode = Episode(0, 0, 0, 5, None, task_id="t-1")
    session = play(player, episode)
    assert session.resets == [{"seed": 5, "task_id": "t-1"}]
    assert episode.messages[:2] == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "0"},  # no prompt: the observation is the first message
    ]
    assert [m["content"] for m in episode.messages[2:]] == [
        "hmm",
        "no action in 'hmm'",
        "{'n': -1}",
        "Invalid action: n must be at least 0",
        "{'n': 1}",
        "1",
        "{'n': 2}",
    ]
    assert (episode.turns, episode.steps, episode.invalid_actions) == (4, 2, 2)
    assert episode.done and episode.rewards == [1.0, 1.0]
    assert episode.actions == [{"n": 1}, {"n": 2}]
    assert episode.observations == [{"total": 0}, {"total": 1}, {"total": 3}]
    assert len(episode.env_seconds) == 3 and episode.model_seconds == [0.0] * 4
    assert policy.seen == [{"total": 0}] * 3 + [{"total": 1}]  # the last observation taken
    assert episode.entries == []  # no model call made


class Model:
    def __init__(self) -> None:
        self.options: list[dict[str, Any]] = []

    async def complete_with_tools(self, messages: Any, tools: Any, **options: Any) -> LLMResponse:
        self.options.append(options)
        return LLMResponse(
            '{"n": 3}', prompt_token_ids=[1, 2], completion_token_ids=[3], logprobs=[-0.5]
        )


def to_action(reply: LLMResponse) -> dict[str, Any]:
    import json

    if not reply.content.startswith("{"):
        raise ActionError("not JSON")
    return dict(json.loads(reply.content))


def test_a_model_seeds_from_the_episodes_stream_when_it_has_one() -> None:
    model = Model()
    policy = ModelPolicy(model, to_action, {"temperature": 0.5}, seed=100)  # type: ignore[arg-type]
    player = Player(policy=policy, to_message=default_to_message, max_turns=2)
    play(player, Episode(7, 0, 0, None, "go"))
    play(player, Episode(7, 0, 0, None, "go", rng=random.Random(42)))
    assert model.options == [
        {"temperature": 0.5, "seed": 107},
        {"temperature": 0.5, "seed": random.Random(42).getrandbits(31)},
    ]


def test_model_calls_are_recorded_unless_asked_not_to() -> None:
    policy = ModelPolicy(Model(), to_action)  # type: ignore[arg-type]
    kept = Episode(0, 0, 0, None, "go")
    play(Player(policy=policy, to_message=default_to_message, max_turns=2), kept)
    assert [e.completion_token_ids for e in kept.entries] == [[3]]
    dropped = Episode(0, 0, 0, None, "go")
    player = Player(policy=policy, to_message=default_to_message, max_turns=2, record_calls=False)
    play(player, dropped)
    assert dropped.entries == [] and dropped.done
