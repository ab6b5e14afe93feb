"""The same episodes for verl, ART and SkyRL, checked against each contract's field names."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from openenv_runtime.rollouts import build_rollout_func
from openenv_runtime.rollouts.adapters import SkyRLTextEnv, to_art, to_verl
from openenv_runtime.rollouts.episode import Episode
from openenv_runtime.testing import running_server
from openenv_runtime.testing.stub_llm import StubLLM
from tests.fixtures.guess import make_app

pytest.importorskip("openai", reason="needs openenv-runtime[llm]")

VERL_FIELDS = {
    "prompt_ids",
    "response_ids",
    "response_mask",
    "response_logprobs",
    "reward_score",
    "num_turns",
    "metrics",
    "extra_fields",
}
ART_FIELDS = {"messages_and_choices", "reward", "metrics", "metadata"}


@pytest.fixture(scope="module")
def env_url() -> Iterator[str]:
    with running_server(make_app()) as url:
        yield url


@pytest.fixture(scope="module")
def episode(env_url: str) -> Episode:
    def policy(messages: list[dict[str, Any]]) -> str:
        return json.dumps({"guess": sum(m["role"] == "assistant" for m in messages)})

    with StubLLM(policy).serve() as llm:
        rollout = build_rollout_func(env_url, llm=llm, model="m", env_seed=3)
        try:
            rollout(["play"], None)
        finally:
            rollout.close()
    return rollout.last_episodes[0]


def test_verl_agent_loop_output(episode: Episode) -> None:
    out = to_verl(episode)
    assert set(out) == VERL_FIELDS
    assert len(out["response_ids"]) == len(out["response_mask"]) == len(out["response_logprobs"])
    assert out["reward_score"] == 1.0 and out["extra_fields"]["rollout_failed"] is False


def test_art_trajectory(episode: Episode) -> None:
    out = to_art(episode)
    assert set(out) == ART_FIELDS and out["reward"] == 1.0
    choices = [i for i in out["messages_and_choices"] if "message" in i]
    assert len(choices) == episode.turns
    tokens = [int(c["token"].split(":")[1]) for ch in choices for c in ch["logprobs"]["content"]]
    assert tokens == [t for e in episode.entries for t in e.completion_token_ids or []]
    from openai.types.chat.chat_completion import Choice

    for choice in choices:  # ART keeps OpenAI Choice objects for trainable turns
        Choice.model_validate(choice)


def test_skyrl_text_env(env_url: str) -> None:
    env = SkyRLTextEnv(env_url, seed=2)
    try:
        prompt, info = env.init([{"role": "user", "content": "play"}])
        assert "seed 2" in prompt[-1]["content"] and info == {}
        refused = env.step("no idea")
        assert refused["done"] is False and "JSON" in refused["observations"][0]["content"]
        miss = env.step('{"guess": 0}')
        assert set(miss) == {"observations", "reward", "done", "metadata"}
        assert miss["reward"] == 0.0 and miss["observations"][0]["role"] == "user"
        hit = env.step('{"guess": 2}')
        assert hit["done"] is True and hit["reward"] == 1.0 and hit["observations"] == []
    finally:
        env.close()
