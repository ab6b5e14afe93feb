"""A collect episode is played by the rollouts' player and kept as a dataset row."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from openenv_cli.collect.episodes import player, run_episode
from openenv_cli.collect.policies import CallablePolicy
from openenv_cli.collect.spec import CollectSpec, plan
from openenv_runtime.client.generic import DictObservation
from openenv_runtime.errors import EnvError
from openenv_runtime.models import StepResult
from openenv_runtime.rollouts.episode import Player


class Session:
    """Adds the action's ``n``; done at three. ``fail`` raises that on the second step."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.total, self.steps, self.fail = 0, 0, fail
        self.resets: list[dict[str, Any]] = []

    async def reset(self, **options: Any) -> StepResult[Any]:
        self.resets.append(options)
        return StepResult(DictObservation({"total": 0}), None, False)

    async def step(self, action: dict[str, Any]) -> StepResult[Any]:
        self.steps += 1
        if self.fail is not None and self.steps == 2:
            raise self.fail
        self.total += action["n"]
        return StepResult(DictObservation({"total": self.total}), 1.0, self.total >= 3)


def one_at_a_time(observation: dict[str, Any]) -> dict[str, Any]:
    return {"n": 1}


def row_of(session: Session, func: Any = one_at_a_time, **options: Any) -> dict[str, Any]:
    spec = CollectSpec(targets=("x",), episodes=1, policy="m:f", max_turns=5, **options)
    (item,) = plan(spec)
    plays = player(CallablePolicy(func), spec)
    assert isinstance(plays, Player)  # the rollouts' one player
    return asyncio.run(run_episode(session, plays, item, spec))  # type: ignore[arg-type]


def test_a_row_holds_the_whole_conversation_and_its_steps() -> None:
    session = Session()
    row = row_of(session, system_prompt="S")
    assert session.resets == [{"seed": 0}]
    assert [m["content"] for m in row["messages"]] == [
        "S",
        "0",
        *['{"n": 1}', "1", '{"n": 1}', "2", '{"n": 1}', "3"],
    ]
    assert row["observations"] == [json.dumps({"total": t}) for t in range(4)]
    assert row["actions"] == ['{"n": 1}'] * 3 and row["rewards"] == [1.0] * 3
    assert (row["num_steps"], row["total_reward"], row["done"], row["truncated"]) == (
        3,
        3.0,
        True,
        False,
    )
    assert len(row["env_latencies_s"]) == 4 and row["model_latencies_s"] == [0.0] * 3
    assert row["error"] == "" and row["prompt_ids"] == []


def test_failures_are_classified_on_the_row() -> None:
    broken = EnvError("CONNECTION_ERROR", "gone")
    row = row_of(Session(fail=broken))
    assert (row["error"], row["error_kind"]) == ("gone", "env:CONNECTION_ERROR")
    assert row["num_steps"] == 1 and not row["done"] and not row["truncated"]
    row = row_of(Session(fail=TimeoutError()))
    assert (row["error"], row["error_kind"]) == ("timed out", "env:timeout")

    def raises(observation: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("no")

    row = row_of(Session(), raises)
    assert (row["error"], row["error_kind"]) == ("ValueError: no", "policy")
    assert [m["content"] for m in row["messages"]] == ["0"]
