"""A real TRL GRPOTrainer trains 2 steps on the CPU through our rollout_func and through our
environment_factory, with a tiny randomly initialised model and a tokenizer built in code.

Needs the ``train`` extra (torch, transformers, trl, datasets): skipped without it, failed in CI.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv_runtime.testing import running_server
from tests.fixtures.guess import make_app

pytestmark = pytest.mark.integration


def _need(module: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip(f'needs {module}: pip install -e ".[train]" (torch==2.13.0 first, CPU build)')


def tiny_model(vocab_size: int) -> Any:
    transformers = _need("transformers")
    _need("torch").manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=4,
    )
    return transformers.LlamaForCausalLM(config)


def grpo_config(tmp_path: Path, **extra: Any) -> Any:
    trl = _need("trl")
    return trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=2,
        max_completion_length=24,
        learning_rate=1e-3,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        **extra,
    )


@pytest.fixture(scope="module")
def env_url() -> Iterator[str]:
    with running_server(make_app()) as url:
        yield url


def policy(messages: list[dict[str, Any]], request: dict[str, Any]) -> str:
    turn = sum(m["role"] == "assistant" for m in messages)
    return json.dumps({"guess": (turn + int(request.get("seed") or 0)) % 5})


def test_grpo_trains_through_rollout_func(env_url: str, tmp_path: Path) -> None:
    trl = _need("trl")
    datasets = _need("datasets")
    from openenv_runtime.rollouts import build_rollout_func
    from openenv_runtime.testing.stub_llm import StubLLM
    from openenv_runtime.testing.stub_llm.hf import hf_tokenizer

    tokenizer = hf_tokenizer()
    seen: list[list[float]] = []

    def env_reward(completions: list[Any], env_reward: list[float], **kwargs: Any) -> list[float]:
        seen.append(list(env_reward))
        return list(env_reward)

    stub = StubLLM(policy)
    with stub.serve() as llm:
        rollout = build_rollout_func(env_url, llm=llm, model="tiny", max_turns=4, seed=0)
        try:
            trainer = trl.GRPOTrainer(
                model=tiny_model(len(tokenizer)),
                reward_funcs=env_reward,
                args=grpo_config(tmp_path),
                train_dataset=datasets.Dataset.from_dict({"prompt": ["guess", "again"] * 4}),
                processing_class=tokenizer,
                rollout_func=rollout,
            )
            trainer.train()
        finally:
            rollout.close()
    assert trainer.state.global_step == 2
    assert len(seen) == 2 and all(len(rewards) == 2 for rewards in seen)
    assert len(stub.requests) >= 4
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    assert len(losses) == 2


def test_grpo_trains_through_environment_factory(env_url: str, tmp_path: Path) -> None:
    trl = _need("trl")
    datasets = _need("datasets")
    from trl.chat_template_utils import qwen3_chat_template

    from openenv_runtime.rollouts import environment_factory
    from openenv_runtime.testing.stub_llm.hf import hf_tokenizer

    tokenizer = hf_tokenizer(qwen3_chat_template)
    factory = environment_factory(env_url)
    made: list[Any] = []

    def create() -> Any:
        made.append(factory())
        return made[-1]

    trainer = trl.GRPOTrainer(
        model=tiny_model(len(tokenizer)),
        args=grpo_config(tmp_path, max_tool_calling_iterations=2),
        train_dataset=datasets.Dataset.from_dict(
            {"prompt": [[{"role": "user", "content": "Play."}]] * 8, "seed": list(range(8))}
        ),
        processing_class=tokenizer,
        environment_factory=create,
    )
    trainer.train()
    assert trainer.state.global_step == 2
    assert any(env._client is not None for env in made)  # reset opened a session
