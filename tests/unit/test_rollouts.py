"""build_rollout_func: concurrent, exact, group-consistent episodes; failures kept, not dropped."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from openenv_runtime.llm.client import LLMResponse
from openenv_runtime.rollouts import (
    ActionError,
    RolloutError,
    build_rollout_func,
    default_to_action,
    default_to_message,
)
from openenv_runtime.testing import free_port, running_server
from openenv_runtime.testing.stub_llm import StubLLM
from tests.fixtures.guess import make_app

pytest.importorskip("openai", reason="needs openenv-runtime[llm]")


def counting_policy(messages: list[dict[str, Any]]) -> str:
    """Guesses 0, 1, 2, ... ; 'broken' prompts send the failing action, 'slow' ones the hang,
    'talk' ones start with text that is not an action."""
    first = str(messages[0]["content"])
    turn = sum(m["role"] == "assistant" for m in messages)
    if first.startswith("broken"):
        return '{"guess": -1}'
    if first.startswith("slow"):
        return '{"guess": -2}'
    if first.startswith("talk") and turn == 0:
        return "let me think"
    return json.dumps({"guess": turn - (1 if first.startswith("talk") else 0)})


@pytest.fixture(scope="module")
def env_url() -> Iterator[str]:
    with running_server(make_app()) as url:
        yield url


@pytest.fixture
def stub() -> Iterator[tuple[StubLLM, str]]:
    llm = StubLLM(counting_policy)
    with llm.serve() as url:
        yield llm, url


def _seed_of(messages: list[dict[str, Any]]) -> str:
    found = re.search(r"seed (\d+)", str(messages[0]["content"]))
    assert found is not None
    return found.group(1)


def test_episodes_are_exact_grouped_and_rewarded(env_url: str, stub: tuple[StubLLM, str]) -> None:
    llm, url = stub
    rollout = build_rollout_func(env_url, llm=url, model="m", group_size=3, max_turns=10)
    try:
        out = rollout(["alpha", "beta"], None)
        episodes = rollout.last_episodes
    finally:
        rollout.close()
    assert {len(v) for v in out.values()} == {6}
    assert out["rollout_failed"] == [False] * 6
    assert out["env_reward"] == [1.0] * 6
    # Group-consistent resets: one seed per group, another for the next group.
    seeds = [_seed_of(e.messages) for e in episodes]
    assert seeds[:3] == [seeds[0]] * 3 and seeds[3:] == [seeds[3]] * 3 and seeds[0] != seeds[3]
    tok = llm.tokenizer
    for i, episode in enumerate(episodes):
        ids, mask, logprobs = out["completion_ids"][i], out["env_mask"][i], out["logprobs"][i]
        assert len(ids) == len(mask) == len(logprobs)
        # The whole sequence is the template of the conversation as played.
        rendered = tok.apply_chat_template(episode.messages, add_generation_prompt=False)
        sequence = out["prompt_ids"][i] + ids
        assert rendered[: len(sequence)] == sequence
        # Masked-in tokens are exactly the sampled ones, with the server's log-probabilities.
        assert [t for t, m in zip(ids, mask, strict=True) if m] == [
            t for e in episode.entries for t in e.completion_token_ids or []
        ]
        assert [lp for lp, m in zip(logprobs, mask, strict=True) if m] == [
            lp for e in episode.entries for lp in e.per_token_logps or []
        ]
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask, strict=True) if not m)
    calls = len(llm.requests)
    assert calls == sum(e.turns for e in episodes)


def test_trl_repeats_form_groups_and_calls_continue_seeds(
    env_url: str, stub: tuple[StubLLM, str]
) -> None:
    _, url = stub
    rollout = build_rollout_func(env_url, llm=url, model="m", max_turns=10, env_seed=10)
    try:
        rollout(["a", "a", "b", "b"], None)
        first = [_seed_of(e.messages) for e in rollout.last_episodes]
        rollout(["a", "a"], None)
        second = [_seed_of(e.messages) for e in rollout.last_episodes]
    finally:
        rollout.close()
    assert first == ["10", "10", "11", "11"] and second == ["12", "12"]


def test_unproducible_action_is_fed_back_and_counted(
    env_url: str, stub: tuple[StubLLM, str]
) -> None:
    _, url = stub
    rollout = build_rollout_func(env_url, llm=url, model="m", max_turns=10)
    try:
        out = rollout(["talk to me"], None)
    finally:
        rollout.close()
    (episode,) = rollout.last_episodes
    assert out["invalid_actions"] == [1] and out["env_reward"] == [1.0]
    assert "not a JSON action" in episode.messages[2]["content"]


def test_environment_failures_mark_the_episode_and_keep_the_batch(
    env_url: str, stub: tuple[StubLLM, str]
) -> None:
    _, url = stub
    rollout = build_rollout_func(
        env_url, llm=url, model="m", max_turns=10, concurrency=2, env_timeout=1.0
    )
    try:
        out = rollout(["ok one", "broken", "slow", "ok two", "ok three"], None)
        episodes = rollout.last_episodes
        again = rollout(["ok four"], None)  # the pool's slots were replaced
    finally:
        rollout.close()
    assert out["rollout_failed"] == [False, True, True, False, False]
    assert out["env_reward"] == [1.0, 0.0, 0.0, 1.0, 1.0]
    assert "environment:" in (episodes[1].error or "") and "TimeoutError" in (
        episodes[2].error or ""
    )
    # A failed episode still carries the tokens it produced, aligned.
    assert len(out["completion_ids"][1]) == len(out["env_mask"][1]) > 0
    assert again["rollout_failed"] == [False]


def test_model_failure_marks_the_episode(env_url: str, stub: tuple[StubLLM, str]) -> None:
    llm, url = stub
    llm.fail_next(1, 400)
    rollout = build_rollout_func(env_url, llm=url, model="m", max_turns=10, concurrency=1)
    try:
        out = rollout(["first", "second"], None)
    finally:
        rollout.close()
    assert out["rollout_failed"] == [True, False]
    assert "model: ModelCallError: HTTP 400" in (rollout.last_episodes[0].error or "")


def test_a_busy_model_server_is_retried(env_url: str, stub: tuple[StubLLM, str]) -> None:
    llm, url = stub
    llm.fail_next(2, 503)  # two failures, then an answer: the third attempt succeeds
    rollout = build_rollout_func(env_url, llm=url, model="m", max_turns=1, concurrency=1)
    try:
        out = rollout(["only"], None)
    finally:
        rollout.close()
    assert out["rollout_failed"] == [False]
    assert rollout.last_episodes[0].turns == 1


def test_a_server_without_token_ids_stops_the_batch_with_the_fix(env_url: str) -> None:
    with StubLLM(counting_policy, token_ids=False).serve() as url:
        rollout = build_rollout_func(env_url, llm=url, model="m")
        try:
            with pytest.raises(RolloutError, match="return_token_ids") as caught:
                rollout(["x"], None)
        finally:
            rollout.close()
    assert "model:no_token_ids (1)" in str(caught.value)
    assert rollout.last_episodes[0].error_kind == "model:no_token_ids"


def test_a_model_name_the_server_does_not_serve_stops_the_batch(env_url: str) -> None:
    with StubLLM(counting_policy, model="served", check_model=True).serve() as url:
        rollout = build_rollout_func(env_url, llm=url, model="typo", group_size=3)
        try:
            with pytest.raises(RolloutError) as caught:
                rollout(["x"], None)
        finally:
            rollout.close()
    text = str(caught.value)
    assert "3 of 3 episodes failed" in text and "model:not_found (3)" in text
    assert "does not exist" in text and "/v1/models" in text


def test_a_model_server_that_is_down_stops_the_batch(env_url: str) -> None:
    rollout = build_rollout_func(
        env_url, llm=f"http://127.0.0.1:{free_port()}", model="m", group_size=2
    )
    try:
        with pytest.raises(RolloutError, match=r"model:unreachable \(2\)"):
            rollout(["x"], None)
    finally:
        rollout.close()
    assert all(e.error.startswith("model:") for e in rollout.last_episodes if e.error)


def test_more_failed_episodes_than_the_rate_allows_stop_the_batch(
    env_url: str, stub: tuple[StubLLM, str]
) -> None:
    _, url = stub
    prompts = ["broken a", "broken b", "ok"]
    strict = build_rollout_func(env_url, llm=url, model="m", max_turns=10, concurrency=3)
    lenient = build_rollout_func(
        env_url, llm=url, model="m", max_turns=10, concurrency=3, max_error_rate=1.0
    )
    try:
        with pytest.raises(RolloutError, match="2 of 3 episodes failed") as caught:
            strict(prompts, None)
        assert lenient(prompts, None)["rollout_failed"] == [True, True, False]
    finally:
        strict.close()
        lenient.close()
    assert "env:EXECUTION_ERROR (2)" in str(caught.value)


def test_sampling_options_pass_through(env_url: str, stub: tuple[StubLLM, str]) -> None:
    llm, url = stub
    rollout = build_rollout_func(
        env_url, llm=url, model="m", group_size=2, max_turns=1, temperature=0.7, seed=5
    )
    try:
        rollout(["p"], None)
    finally:
        rollout.close()
    assert {r["temperature"] for r in llm.requests} == {0.7}
    assert sorted(r["seed"] for r in llm.requests) == [5, 6]


def test_default_mapping() -> None:
    one_string = {"properties": {"message": {"type": "string"}, "wait": {"type": "number"}}}
    assert default_to_action(one_string)(LLMResponse(" hi ")) == {"message": "hi"}
    schema = {"properties": {"guess": {"type": "integer"}}, "required": ["guess"]}
    to_action = default_to_action(schema)
    assert to_action(LLMResponse('```json\n{"guess": 3}\n```')) == {"guess": 3}
    for bad in ("nope", "[1]", '{"other": 1}'):
        with pytest.raises(ActionError):
            to_action(LLMResponse(bad))
    observation = {"hint": "higher", "reward": 0.0, "done": False, "metadata": {}}
    assert default_to_message(observation) == "higher"
    assert json.loads(default_to_message({"a": 1, "b": "x", "done": True})) == {"a": 1, "b": "x"}


def test_the_api_key_goes_to_the_model_server(env_url: str) -> None:
    with StubLLM(counting_policy, api_key="sk-right").serve() as url:
        right = build_rollout_func(env_url, llm=url, model="m", max_turns=1, api_key="sk-right")
        wrong = build_rollout_func(env_url, llm=url, model="m", max_turns=1)
        try:
            assert right(["p"], None)["rollout_failed"] == [False]
            with pytest.raises(RolloutError, match="model:unauthorized") as caught:
                wrong(["p"], None)
        finally:
            right.close()
            wrong.close()
    assert "HTTP 401" in str(caught.value)  # refused, and not retried into a hang


def test_episodes_run_on_the_shared_background_loop(
    env_url: str, stub: tuple[StubLLM, str]
) -> None:
    import asyncio

    from openenv_runtime.blocking import background_loop

    loops: list[asyncio.AbstractEventLoop] = []

    def to_action(reply: LLMResponse) -> dict[str, Any]:
        loops.append(asyncio.get_running_loop())
        return {"guess": 0}

    _, url = stub
    rollout = build_rollout_func(env_url, llm=url, model="m", max_turns=1, to_action=to_action)
    try:
        rollout(["alpha"], None)
    finally:
        rollout.close()
    assert loops and loops[0] is background_loop()
